#include "backends/cpu/draft_model.hpp"

#include <algorithm>
#include <span>

#include "engine/speculation.hpp"
#include "model/sampling/filters.hpp"

namespace conveyor {

DraftModel::DraftModel(std::shared_ptr<Transformer> transformer, std::shared_ptr<KvCache> kv)
    : transformer_(std::move(transformer)), kv_(std::move(kv)) {}

void DraftModel::prepare(StepPlan& plan) {
  copy_host_blocks(*kv_, plan.copies);
  ForwardBatch& target = plan.batch;
  // What the target computes that the draft has not seen: every span but
  // the drafting ones, whose first token is the first draft step's input.
  batch_.clear();
  spans_.clear();
  for (int32_t s = 0; s < target.num_seqs(); ++s) {
    const auto tokens = target.seq_tokens(s);
    if (tokens.size() > 1 && tokens[1] == kModelDraft) spans_.push_back(s);
    else batch_.add_sequence(tokens, target.seq_start_pos[size_t(s)], target.block_table(s), 0);
  }
  if (batch_.num_seqs() > 0) transformer_->forward(batch_, *kv_, logits_);
  if (spans_.empty()) return;

  const int32_t vocab = transformer_->config().vocab_size;
  int32_t most = 0;
  for (int32_t s : spans_) most = std::max(most, int32_t(target.seq_tokens(s).size()) - 1);
  for (int32_t j = 0; j <= most; ++j) {
    batch_.clear();
    rows_.clear();
    for (int32_t s : spans_) {
      const int32_t drafts = int32_t(target.seq_tokens(s).size()) - 1;
      if (j > drafts) continue;
      const int32_t* token = target.tokens.data() + target.seq_token_begin[size_t(s)] + j;
      batch_.add_sequence(std::span<const int32_t>(token, 1), target.seq_start_pos[size_t(s)] + j,
                          target.block_table(s), j < drafts ? 1 : 0);
      if (j < drafts) rows_.push_back(s);
    }
    transformer_->forward(batch_, *kv_, logits_);
    for (size_t r = 0; r < rows_.size(); ++r) {
      const std::span<const float> row(logits_.data() + r * size_t(vocab), size_t(vocab));
      target.tokens[size_t(target.seq_token_begin[size_t(rows_[r])] + j + 1)] = sampling::argmax(row);
    }
  }
}

}  // namespace conveyor
