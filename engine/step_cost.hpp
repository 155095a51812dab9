// What a step costs, learned from the steps the engine runs: the iteration
// budget of a latency target (EngineConfig::target_itl_ms).
//
// A step's time is modelled as
//   t = a + b·d + c·p
// with d the decode tokens and p the prefill tokens it computes. a + b·d is
// fitted on decode-only steps (a weighted least-squares line through their
// (d, t)), c on mixed steps as the least-squares slope of what their prefill
// added over that line. All sums decay by `decay` per observation, so the
// model follows the costs as contexts grow or the machine's load changes,
// and forgets nothing abruptly. Until a kind of step has been seen the
// model assumes a prior (kPrior*), deliberately pessimistic for prefill, so
// that the first iterations under a target take small chunks.
//
// Thread-safety: none; the scheduler core owns one.
#pragma once

#include <cstdint>

namespace conveyor {

class StepCostModel {
 public:
  static constexpr double kPriorBase = 2e-3;       // s per step
  static constexpr double kPriorDecode = 1e-4;     // s per decode token
  static constexpr double kPriorPrefill = 1e-3;    // s per prefill token

  explicit StepCostModel(double decay = 0.97) : decay_(decay) {}

  // A step computed `decode` decode tokens and `prefill` prefill tokens in
  // `seconds`. Ignored when empty or not a positive time.
  void observe(int32_t decode, int32_t prefill, double seconds);

  // Predicted seconds of a step.
  double predict(int32_t decode, int32_t prefill) const;
  // The prefill tokens that a step with `decode` decode tokens may add and
  // stay within `target` seconds; never below `floor` (so prompts progress
  // even when the decodes alone take longer than the target).
  int32_t prefill_allowance(int32_t decode, double target, int32_t floor) const;

  double prefill_seconds_per_token() const;  // c

 private:
  double base(int32_t decode) const;  // a + b·d

  double decay_;
  // Decode-only steps: decayed sums of weight, d, t, d², d·t.
  double w_ = 0, sd_ = 0, st_ = 0, sdd_ = 0, sdt_ = 0;
  // Mixed steps: decayed sums of p² and p·(t − base(d)).
  double spp_ = 0, spr_ = 0;
};

}  // namespace conveyor
