// The draft model of `--speculative draft:FILE` (SpeculativeMethod::draft):
// a small model with the target's vocabulary that proposes each verify
// step's drafts, greedily, inside the CPU runner's step.
//
// Its KV cache has the target's blocks (the same count and size), so a
// plan's block tables serve both models and the block manager knows nothing
// of it. Before the target's forward pass, prepare() first runs the draft
// model over every span the target computes except the drafts (prefill
// chunks, plain decode tokens), so that its cache holds what the target's
// does; then, for the spans whose tokens after the first are kModelDraft,
// it runs k + 1 one-token steps batched over those spans: step j reads the
// span's token j at its position and writes the argmax as draft j + 1; the
// last step only writes the last draft's keys and values. So after any
// verify step the draft cache holds every position the target accepted
// (the rejected ones are overwritten when computed again), and the next
// step drafts from the target's last token.
//
// Copy-on-write copies go to both caches. Blocks that a swap
// brings back hold the target's keys and values only: the draft's there are
// whatever the block held before, which lowers acceptance for that
// sequence but never changes its output, which is always the target's.
//
// Thread-safety: used from the runner's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backends/cpu/transformer.hpp"
#include "engine/engine_types.hpp"
#include "model/batch.hpp"
#include "model/kv_cache.hpp"

namespace conveyor {

class DraftModel {
 public:
  // `kv` has the target cache's block count and block size.
  DraftModel(std::shared_ptr<Transformer> transformer, std::shared_ptr<KvCache> kv);
  // Makes the plan's copy-on-write copies in the draft's cache, runs the
  // draft model over its spans and writes its kModelDraft tokens.
  void prepare(StepPlan& plan);

 private:
  std::shared_ptr<Transformer> transformer_;
  std::shared_ptr<KvCache> kv_;
  ForwardBatch batch_;         // reused between calls
  std::vector<int32_t> spans_; // the plan's spans that draft
  std::vector<int32_t> rows_;  // spans whose step j samples a draft, in logits row order
  std::vector<float> logits_;
};

}  // namespace conveyor
