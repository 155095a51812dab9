// The draft model of `--speculative draft:FILE` (SpeculativeMethod::draft):
// a small model with the target's vocabulary that proposes each verify
// step's drafts, greedily, inside the CPU runner's step.
//
// Its KV cache has the target's blocks (the same count and size), so a
// plan's block tables serve both models and the block manager knows nothing
// of it. The draft model runs only for the sequences that draft in a step:
// it keeps every sequence's tokens (from its sampler's prompt and history
// when the sequence enters a plan, then each span the target computes) and
// how many of the first of them its cache holds. A sequence that drafts
// first catches up: the draft model runs over the positions its cache
// lacks, batched over the drafting sequences. Then, for those spans (whose
// tokens after the first are kModelDraft) it runs k + 1 one-token steps:
// step j reads the span's token j at its position and writes the argmax as
// draft j + 1; the last step only writes the last draft's keys and values.
// Positions the target rejects are forgotten when the next span starts
// before them. So while the batch is too large for anyone to draft, the
// draft model costs nothing.
//
// Copy-on-write copies go to both caches, and a forked sample starts with
// its parent's count. A prompt whose blocks came from the prefix cache is
// run again by the draft model when its sequence first drafts (the block
// may hold no draft keys and values). Blocks that a swap brings back hold
// the target's keys and values only (StepPlan::restored): the draft model
// runs over such a sequence again when it next drafts.
//
// Thread-safety: used from the runner's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
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
  // Makes the plan's copy-on-write copies in the draft's cache, follows its
  // sequences' tokens and writes its kModelDraft tokens.
  void prepare(StepPlan& plan);
  // Forgets every sequence (the runner was reset).
  void reset() { seqs_.clear(); }

 private:
  std::shared_ptr<Transformer> transformer_;
  std::shared_ptr<KvCache> kv_;
  struct SeqTokens {
    std::vector<int32_t> tokens;  // the sequence's tokens so far, from position 0
    int32_t synced = 0;           // the first `synced` of them are in the draft's cache
  };
  std::unordered_map<seq_id, SeqTokens> seqs_;
  ForwardBatch batch_;         // reused between calls
  std::vector<int32_t> spans_; // the plan's spans that draft
  std::vector<int32_t> rows_;  // spans whose step j samples a draft, in logits row order
  std::vector<float> logits_;
};

}  // namespace conveyor
