#include "bench/soak/soak_report.hpp"

#include <cstdio>

namespace conveyor::soak {

const char* transport_name(Transport t) {
  switch (t) {
    case Transport::sse_completions: return "sse-completions";
    case Transport::sse_chat: return "sse-chat";
    case Transport::ws: return "websocket";
  }
  return "?";
}

void Tally::add(const StreamPlan& plan, const StreamOutcome& outcome) {
  ++sent;
  ++sent_by_transport[transport_name(plan.transport)];
  switch (outcome.end) {
    case StreamEnd::completed:
      ++completed;
      if (plan.abandon != Abandon::none) ++completed_before_abandon;
      break;
    case StreamEnd::abandoned:
      ++abandoned;
      if (outcome.events == 0) ++abandoned_at_start;
      if (outcome.collateral) ++abandoned_collateral;
      break;
    case StreamEnd::lost:
      ++lost;
      ++errors[outcome.error];
      break;
  }
}

void Tally::merge(const Tally& o) {
  sent += o.sent;
  completed += o.completed;
  completed_before_abandon += o.completed_before_abandon;
  abandoned += o.abandoned;
  abandoned_at_start += o.abandoned_at_start;
  abandoned_collateral += o.abandoned_collateral;
  lost += o.lost;
  for (const auto& [k, n] : o.errors) errors[k] += n;
  for (const auto& [k, n] : o.sent_by_transport) sent_by_transport[k] += n;
}

std::vector<std::string> check_phase(const Tally& t, const SettledState& end) {
  std::vector<std::string> f;
  if (t.lost != 0) f.push_back(std::to_string(t.lost) + " lost requests");
  if (t.completed + t.abandoned + t.lost != t.sent) f.push_back("streams unaccounted for");
  if (!end.settled) f.push_back("the engine did not settle");
  if (end.running || end.waiting || end.swapped)
    f.push_back("requests left in the engine (running " + std::to_string(end.running) + ", waiting " +
                std::to_string(end.waiting) + ", swapped " + std::to_string(end.swapped) + ")");
  if (end.blocks_used || end.host_blocks_used)
    f.push_back("KV blocks in use at the end: " + std::to_string(end.blocks_used) + " device, " +
                std::to_string(end.host_blocks_used) + " host");
  if (end.metrics_running != 0 || end.metrics_waiting != 0 || end.metrics_kv_usage != 0)
    f.push_back("/metrics does not say idle (running " + std::to_string(end.metrics_running) + ", waiting " +
                std::to_string(end.metrics_waiting) + ", kv usage " + std::to_string(end.metrics_kv_usage) + ")");
  return f;
}

namespace {

void print_tally(const Tally& t) {
  std::printf("    sent %lld (", (long long)t.sent);
  bool first = true;
  for (const auto& [k, n] : t.sent_by_transport) {
    std::printf("%s%s %lld", first ? "" : ", ", k.c_str(), (long long)n);
    first = false;
  }
  std::printf("): completed %lld (%lld before their abandon point), abandoned by the client %lld "
              "(%lld before any event, %lld with their WebSocket), lost %lld\n",
              (long long)t.completed, (long long)t.completed_before_abandon, (long long)t.abandoned,
              (long long)t.abandoned_at_start, (long long)t.abandoned_collateral, (long long)t.lost);
  if (t.errors.empty()) {
    std::printf("    errors: none\n");
  } else {
    for (const auto& [k, n] : t.errors) std::printf("    error %-40s %lld\n", k.c_str(), (long long)n);
  }
}

}  // namespace

void print_phase(const PhaseReport& p) {
  std::printf("phase %-10s %s: %.1f s, %.0f streams/s, %llu tokens generated, preemptions: %llu recompute, "
              "%llu swap\n",
              p.name.c_str(), p.policies.c_str(), p.seconds, p.seconds > 0 ? double(p.tally.sent) / p.seconds : 0.0,
              (unsigned long long)p.generated_tokens, (unsigned long long)p.preemptions_recompute,
              (unsigned long long)p.preemptions_swap);
  print_tally(p.tally);
  const SettledState& e = p.end;
  std::printf("    at the end (%s in %.2f s): running %d, waiting %d, swapped %d, KV blocks in use %d of %d "
              "(host %d); /metrics: running %.0f, waiting %.0f, kv usage %.3f\n",
              e.settled ? "settled" : "NOT settled", e.settle_seconds, e.running, e.waiting, e.swapped,
              e.blocks_used, e.blocks_total, e.host_blocks_used, e.metrics_running, e.metrics_waiting,
              e.metrics_kv_usage);
  std::printf("    memory: VmRSS %.1f MiB, heap in use %.1f MiB, heap held %.1f MiB, threads %lld\n",
              double(p.rss_kib) / 1024.0, double(p.heap_in_use_kib) / 1024.0, double(p.heap_held_kib) / 1024.0,
              (long long)p.threads);
  for (const std::string& f : p.failures) std::printf("    FAIL: %s\n", f.c_str());
}

void print_total(const std::vector<PhaseReport>& phases, const Tally& total, double seconds) {
  uint64_t recompute = 0, swap = 0, tokens = 0;
  for (const PhaseReport& p : phases) {
    recompute += p.preemptions_recompute;
    swap += p.preemptions_swap;
    tokens += p.generated_tokens;
  }
  std::printf("total: %.1f s, %.0f streams/s, %llu tokens generated, preemptions: %llu recompute, %llu swap\n",
              seconds, seconds > 0 ? double(total.sent) / seconds : 0.0, (unsigned long long)tokens,
              (unsigned long long)recompute, (unsigned long long)swap);
  print_tally(total);
}

}  // namespace conveyor::soak
