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
// its parent's count. Blocks that a swap brings back hold the target's keys
// and values only (StepPlan::restored): the draft model runs over such a
// sequence again when it next drafts.
//
// A block the prefix cache shares is not run again where the draft's cache
// already holds it: for every block whose draft keys and values are known
// (all its positions computed by the draft model and confirmed by the
// target), the draft model remembers the block's key, a hash chained over
// the tokens from position 0 to the block's end. A sequence that catches up
// first skips its leading blocks whose keys match what its own tokens give;
// a block the draft model writes again is forgotten first. (Two sequences
// that write the same shared block write the same keys and values: same
// tokens, same positions.) A collision of 64-bit keys could only lower
// acceptance.
//
// Thread-safety: used from the runner's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
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
  void reset();
  // Positions the draft model ran over to catch up (for tests and benchmarks).
  int64_t caught_up() const { return caught_up_; }

 private:
  std::shared_ptr<Transformer> transformer_;
  std::shared_ptr<KvCache> kv_;
  struct SeqTokens {
    std::vector<int32_t> tokens;  // the sequence's tokens so far, from position 0
    int32_t synced = 0;           // the first `synced` of them are in the draft's cache
    std::vector<uint64_t> keys;   // the chained keys of its first full blocks
    int32_t remembered = 0;       // of its leading blocks, those marked in block_keys_
    bool shown = true;            // false: positions it was never shown are trusted
  };
  // The key of block i of `q` (its tokens must reach the block's end).
  uint64_t key_of(SeqTokens& q, int32_t i);
  // Marks the full blocks of `q`'s first `known` positions as known in the draft's cache.
  void remember(SeqTokens& q, std::span<const int32_t> table, int32_t known);
  // Raises `q`'s synced count over leading blocks (below `start`) whose draft keys and values are known.
  void reuse(SeqTokens& q, std::span<const int32_t> table, int32_t start);
  // The blocks that positions [from, to) of a span with `table` write are not known any more.
  void forget(std::span<const int32_t> table, int32_t from, int32_t to);

  std::unordered_map<seq_id, SeqTokens> seqs_;
  std::vector<uint64_t> block_keys_;  // per block: the key of what the draft's cache holds, or 0
  int64_t caught_up_ = 0;
  ForwardBatch batch_;         // reused between calls
  std::vector<int32_t> spans_; // the plan's spans that draft
  std::vector<int32_t> rows_;  // spans whose step j samples a draft, in logits row order
  std::vector<float> logits_;
};

}  // namespace conveyor
