// The preemption rule: when running sequences are short of KV blocks, which
// of them give their blocks back, and how.
//
// Victims are taken least urgent first (the largest priority value: lower
// runs sooner, as vLLM defines it), then latest arrival (the newest request
// has the least work to lose), until the blocks they hold cover the
// shortfall and there are at least min_victims of them. Each victim gets a mode:
//   recompute  its blocks are freed; it re-prefills its prompt and generated
//              tokens when it comes back;
//   swap       its blocks are copied to host memory and back later; when the
//              host swap space left cannot take a victim's blocks, that victim
//              falls back to recompute;
//   cost       per victim, the cheaper of the two by the cost model:
//              recompute = tokens_to_recompute * recompute_seconds_per_token,
//              swap      = 2 * blocks_to_copy * copy_seconds_per_block (out
//              now and in later), swap only if the host space fits.
// The cost model starts from the defaults below (rough figures for a small
// model on a CPU; replace them by measurements) and follows the measurements
// fed to observe_*() as exponential moving averages.
//
// Thread-safety: none; one owner (the preemption policy actor).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace conveyor {

enum class PreemptionMode : uint8_t { recompute, swap, cost };
const char* to_string(PreemptionMode mode);
// "recompute" | "swap" | "cost".
Expected<PreemptionMode> parse_preemption_mode(std::string_view name);

// One running sequence, as the policy sees it.
struct PreemptionCandidate {
  uint64_t id = 0;
  int32_t priority = 0;             // effective (aging included): the largest is preempted first
  uint64_t arrival = 0;             // submission order: larger arrived later
  int32_t blocks_held = 0;          // device blocks that preempting it gives back
  int32_t tokens_to_recompute = 0;  // tokens a recompute would prefill again
  int32_t blocks_to_copy = 0;       // blocks a swap copies (host blocks it needs)
};

struct PreemptionQuery {
  int32_t shortfall = 0;            // device blocks missing
  // Sequences to preempt at least (a more urgent request waits for a slot:
  // the priority scheduling policy); 0 usually.
  int32_t min_victims = 0;
  int32_t free_host_blocks = 0;     // swap space left
  std::vector<PreemptionCandidate> running;
};

struct Victim {
  uint64_t seq = 0;
  PreemptionMode mode = PreemptionMode::recompute;  // recompute or swap, never cost
};

struct PreemptionDecision {
  std::vector<Victim> victims;      // in the order to preempt them
  int32_t blocks_released = 0;      // sum of the victims' blocks_held
  bool covers_shortfall = false;    // false: even every candidate was not enough
                                    // (blocks or min_victims)
};

struct PreemptionCosts {
  double recompute_seconds_per_token = 5e-5;
  double copy_seconds_per_block = 2e-5;  // one direction
};

class PreemptionPolicy {
 public:
  explicit PreemptionPolicy(PreemptionMode mode = PreemptionMode::recompute,
                            PreemptionCosts costs = {});

  // Picks victims for q; `out` is overwritten (its capacity is reused).
  void decide(const PreemptionQuery& q, PreemptionDecision& out);
  PreemptionDecision operator()(const PreemptionQuery& q) {
    PreemptionDecision d;
    decide(q, d);
    return d;
  }

  // Measurements for the cost mode: `tokens` recomputed in `seconds`, or
  // `blocks` copied one way in `seconds`. Ignored when not positive.
  void observe_recompute(int64_t tokens, double seconds);
  void observe_copy(int64_t blocks, double seconds);

  PreemptionMode mode() const { return mode_; }
  void set_mode(PreemptionMode mode) { mode_ = mode; }
  const PreemptionCosts& costs() const { return costs_; }

  // The smoothing weight of a new measurement.
  static constexpr double kCostSmoothing = 0.2;

 private:
  PreemptionMode mode_for(const PreemptionCandidate& c, int32_t host_free) const;

  PreemptionMode mode_;
  PreemptionCosts costs_;
  std::vector<uint32_t> order_;  // scratch: candidate indices in victim order
};

}  // namespace conveyor
