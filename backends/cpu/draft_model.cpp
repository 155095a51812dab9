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
  for (seq_id id : plan.retired) seqs_.erase(id);
  for (seq_id id : plan.restored)  // a swap brought back the target's keys and values only
    if (auto it = seqs_.find(id); it != seqs_.end()) it->second.synced = 0;
  for (size_t i = 0; i < plan.new_samplers.size(); ++i) {
    SeqTokens& q = seqs_[plan.new_samplers[i].first];
    q.tokens = plan.new_sampler_prompts[i];
    if (i < plan.new_sampler_history.size())
      q.tokens.insert(q.tokens.end(), plan.new_sampler_history[i].begin(), plan.new_sampler_history[i].end());
    q.synced = 0;
  }
  for (const auto& [parent, child] : plan.forks) {
    auto p = seqs_.find(parent), c = seqs_.find(child);
    if (p != seqs_.end() && c != seqs_.end())
      c->second.synced = std::min(p->second.synced, int32_t(c->second.tokens.size()));
  }

  // Every span's tokens are the sequence's from its start on; the drafting
  // spans (token 1 is kModelDraft) first catch up on what the cache lacks.
  ForwardBatch& target = plan.batch;
  batch_.clear();
  spans_.clear();
  for (int32_t s = 0; s < target.num_seqs(); ++s) {
    const auto tokens = target.seq_tokens(s);
    if (tokens.empty()) continue;
    const int32_t start = target.seq_start_pos[size_t(s)];
    SeqTokens& q = seqs_[plan.seq_ids[size_t(s)]];
    if (int32_t(q.tokens.size()) < start) {  // tokens it was never shown: trust the cache there
      q.tokens.resize(size_t(start), 0);
      q.synced = start;
    }
    q.tokens.resize(size_t(start));
    q.synced = std::min(q.synced, start);
    if (tokens.size() > 1 && tokens[1] == kModelDraft) {
      spans_.push_back(s);
      if (q.synced < start)
        batch_.add_sequence(std::span<const int32_t>(q.tokens).subspan(size_t(q.synced)), q.synced,
                            target.block_table(s), 0);
    } else {
      q.tokens.insert(q.tokens.end(), tokens.begin(), tokens.end());
    }
  }
  if (spans_.empty()) return;
  if (batch_.num_seqs() > 0) transformer_->forward(batch_, *kv_, logits_);

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
  for (int32_t s : spans_) {  // the draft's cache now holds the whole span
    SeqTokens& q = seqs_[plan.seq_ids[size_t(s)]];
    const auto tokens = target.seq_tokens(s);
    q.tokens.insert(q.tokens.end(), tokens.begin(), tokens.end());
    q.synced = int32_t(q.tokens.size());
  }
}

}  // namespace conveyor
