// Sampling on the host, for every backend's StepRunner: each sequence's
// Sampler, its last sample (which fills the placeholders of a plan built a
// step ahead), and the inputs a device needs to sample on its own.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine_types.hpp"
#include "model/sampling/sampler.hpp"

namespace conveyor {

// Keeps the per-sequence samplers that every runner needs: created when a
// plan starts a sequence, dropped when it retires.
class SamplerTable {
 public:
  void apply(const StepPlan& plan);  // new_samplers (with their history) and retired
  void drop(std::span<const seq_id> ids);
  Sampler* find(seq_id id);
  size_t size() const { return samplers_.size(); }
  void clear() { samplers_.clear(); }

 private:
  std::unordered_map<seq_id, std::unique_ptr<Sampler>> samplers_;
};

// A host runner's side of planning ahead: remembers each sequence's last
// sample and fills the placeholders of the next plan with it. Steps run in
// order, so the placeholder is always that sample.
class SampleMemory {
 public:
  // Drops retired sequences and fills the plan's placeholders.
  void prepare(StepPlan& plan);
  void record(const StepResult& result);
  void drop(std::span<const seq_id> ids);
  void clear() { last_.clear(); }

 private:
  std::unordered_map<seq_id, int32_t> last_;
};

// Samples a step's logits rows on the host with each sequence's Sampler,
// and keeps what every runner needs between steps: the samplers (created
// when a plan starts a sequence, dropped when it retires) and each
// sequence's last sample (SampleMemory). Rows whose samples fork are sampled
// in order; the others, each with a sampler of its own, in parallel.
class MaskPrefetch;

class HostSampling {
 public:
  HostSampling();
  ~HostSampling();
  // Grammar masks off the critical path (backends/mask_prefetch.hpp): after
  // sample(), a worker thread computes the constrained samplers' next masks
  // while the caller runs the next forward pass. Off by default (the CPU
  // runner's forward pass keeps every core busy); the CUDA runner turns it on.
  void prefetch_masks(bool on);
  // Masks the worker prepared so far (0 with prefetch off).
  uint64_t masks_prepared_ahead() const;

  // Before the forward pass: fills the plan's placeholders, creates and drops samplers.
  void begin(StepPlan& plan);
  // (placeholder's index in plan.batch.tokens, the logits row of the
  // previous step whose sample goes there)
  using Fills = std::vector<std::pair<int32_t, int32_t>>;
  // begin() for a plan launched while `pending`, the step before it, is
  // unfinished and was sampled on the device: the placeholders that
  // pending's samples fill go to `fills` (the device fills them; the plan
  // holds 0 there), device_inputs() gives each row with penalties the row
  // of pending that sampled its sequence (DeviceInputs::previous_row: the
  // penalties count that sample on the device), and the sequences the plan
  // retires are dropped only after accept() has recorded pending's samples.
  void begin_ahead(StepPlan& plan, const StepPlan& pending, Fills& fills);
  // Samples the rows of `logits` ([rows, vocab], as ForwardBatch::want_logits
  // counts them, in batch order; overwritten) into result.tokens, and
  // records them. A span with k + 1 rows is a verify step: its tokens after
  // the first row's are drafts, and its rows are sampled in order while the
  // samples equal them (engine/speculation.hpp), each sequence's tokens
  // in result.tokens in order.
  void sample(const StepPlan& plan, float* logits, int32_t vocab, StepResult& result);
  // What a device needs to sample a step's logits rows with kernels/cuda's
  // apply_penalties and sample_rows: one entry per row, in row order.
  struct DeviceInputs {
    std::vector<float> temperature, min_p, top_p, repetition, frequency, presence;
    std::vector<double> uniforms;
    std::vector<int32_t> top_k, seen_begin, seen, gen_begin, generated, gen_counts;
    // Per row: the previous step's row whose sample the lists lack (-1: none).
    std::vector<int32_t> previous_row;
    bool penalties = false;  // some row has one
    void clear();            // keeps the vectors' capacity for the next step
  };
  // When no sample forks and every row's sampler is device_samplable: fills
  // `in`, drawing each row's uniform from its sampler's generator, and
  // returns true. Else returns false and draws nothing.
  bool device_inputs(const StepPlan& plan, DeviceInputs& in);
  // Records the device's samples (tokens[r] for row r) as sample() would.
  void accept(const StepPlan& plan, const int32_t* tokens, StepResult& result);
  SamplerTable& samplers();
  void clear();

 private:
  void settle();  // the mask worker, if any, is done with every sampler
  std::unique_ptr<MaskPrefetch> prefetch_;
  SamplerTable samplers_;
  SampleMemory samples_;  // fills the placeholders of plans built a step ahead
  std::vector<seq_id> retire_after_accept_;  // begin_ahead's plan's retired sequences
  // From begin_ahead until the pending step's samples are recorded: each
  // sequence's logits row in it.
  std::unordered_map<seq_id, int32_t> pending_rows_;
  void recorded();  // after a step's samples are recorded
  std::vector<float> raw_, fork_logits_;  // a forking row's logits, and a sample's copy
  struct Row {
    seq_id seq;
    Sampler* sampler;
    std::span<float> logits;             // its rows: 1, or 1 + drafts.size()
    std::span<const int32_t> drafts;     // a verify step's (engine/speculation.hpp)
    std::vector<SampledToken> verified;  // the samples after the first, while drafts matched
  };
  std::vector<Row> rows_;  // rows sampled in parallel
};

}  // namespace conveyor
