#include "policies/preemption.hpp"

#include <algorithm>
#include <string>

namespace conveyor {

const char* to_string(PreemptionMode mode) {
  switch (mode) {
    case PreemptionMode::recompute: return "recompute";
    case PreemptionMode::swap: return "swap";
    case PreemptionMode::cost: return "cost";
  }
  return "?";
}

Expected<PreemptionMode> parse_preemption_mode(std::string_view name) {
  if (name == "recompute") return PreemptionMode::recompute;
  if (name == "swap") return PreemptionMode::swap;
  if (name == "cost") return PreemptionMode::cost;
  return make_error(Errc::invalid_argument, "unknown preemption policy '" + std::string(name) +
                                                "' (expected recompute, swap or cost)");
}

PreemptionPolicy::PreemptionPolicy(PreemptionMode mode, PreemptionCosts costs)
    : mode_(mode), costs_(costs) {}

PreemptionMode PreemptionPolicy::mode_for(const PreemptionCandidate& c, int32_t host_free) const {
  const bool fits = c.blocks_to_copy <= host_free;
  switch (mode_) {
    case PreemptionMode::recompute: return PreemptionMode::recompute;
    case PreemptionMode::swap: return fits ? PreemptionMode::swap : PreemptionMode::recompute;
    case PreemptionMode::cost: {
      if (!fits) return PreemptionMode::recompute;
      double recompute = double(c.tokens_to_recompute) * costs_.recompute_seconds_per_token;
      double swap = 2.0 * double(c.blocks_to_copy) * costs_.copy_seconds_per_block;
      return swap < recompute ? PreemptionMode::swap : PreemptionMode::recompute;
    }
  }
  return PreemptionMode::recompute;
}

void PreemptionPolicy::decide(const PreemptionQuery& q, PreemptionDecision& out) {
  out.victims.clear();
  out.blocks_released = 0;
  out.covers_shortfall = q.shortfall <= 0 && q.min_victims <= 0;
  if (out.covers_shortfall) return;

  order_.clear();
  for (uint32_t i = 0; i < q.running.size(); ++i)
    if (q.running[i].blocks_held > 0) order_.push_back(i);  // others would free nothing
  std::sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) {
    const PreemptionCandidate& x = q.running[a];
    const PreemptionCandidate& y = q.running[b];
    if (x.priority != y.priority) return x.priority > y.priority;  // least urgent first
    if (x.arrival != y.arrival) return x.arrival > y.arrival;
    return x.id > y.id;
  });

  int32_t host_free = q.free_host_blocks;
  for (uint32_t i : order_) {
    if (out.blocks_released >= q.shortfall && int32_t(out.victims.size()) >= q.min_victims) break;
    const PreemptionCandidate& c = q.running[i];
    PreemptionMode m = mode_for(c, host_free);
    if (m == PreemptionMode::swap) host_free -= c.blocks_to_copy;
    out.victims.push_back(Victim{c.id, m});
    out.blocks_released += c.blocks_held;
  }
  out.covers_shortfall =
      out.blocks_released >= q.shortfall && int32_t(out.victims.size()) >= q.min_victims;
}

namespace {

void smooth(double& estimate, double sample) {
  estimate += PreemptionPolicy::kCostSmoothing * (sample - estimate);
}

}  // namespace

void PreemptionPolicy::observe_recompute(int64_t tokens, double seconds) {
  if (tokens > 0 && seconds > 0) smooth(costs_.recompute_seconds_per_token, seconds / double(tokens));
}

void PreemptionPolicy::observe_copy(int64_t blocks, double seconds) {
  if (blocks > 0 && seconds > 0) smooth(costs_.copy_seconds_per_block, seconds / double(blocks));
}

}  // namespace conveyor
