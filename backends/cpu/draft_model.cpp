#include "backends/cpu/draft_model.hpp"

#include <algorithm>
#include <span>

#include "engine/prefix_index.hpp"
#include "engine/speculation.hpp"
#include "model/sampling/filters.hpp"

namespace conveyor {

DraftModel::DraftModel(std::shared_ptr<Transformer> transformer, std::shared_ptr<KvCache> kv)
    : transformer_(std::move(transformer)), kv_(std::move(kv)), block_keys_(size_t(kv_->shape().n_blocks), 0) {}

void DraftModel::reset() {
  seqs_.clear();
  std::fill(block_keys_.begin(), block_keys_.end(), 0);
}

uint64_t DraftModel::key_of(SeqTokens& q, int32_t i) {
  const int32_t bs = kv_->shape().block_size;
  while (int32_t(q.keys.size()) <= i) {
    const size_t j = q.keys.size();
    const uint64_t parent = j == 0 ? 0x9E3779B97F4A7C15ull : q.keys[j - 1];
    const uint64_t key = prefix_key_hash(parent, std::span<const int32_t>(q.tokens).subspan(j * size_t(bs), size_t(bs)));
    q.keys.push_back(key == 0 ? 1 : key);  // 0 means unknown
  }
  return q.keys[size_t(i)];
}

void DraftModel::remember(SeqTokens& q, std::span<const int32_t> table, int32_t known) {
  const int32_t full = std::min<int32_t>(known / kv_->shape().block_size, int32_t(table.size()));
  if (!q.shown) return;
  for (int32_t i = q.remembered; i < full; ++i) block_keys_[size_t(table[size_t(i)])] = key_of(q, i);
  q.remembered = full;
}

void DraftModel::reuse(SeqTokens& q, std::span<const int32_t> table, int32_t start) {
  const int32_t bs = kv_->shape().block_size;
  if (!q.shown) return;
  for (int32_t i = q.synced / bs; (i + 1) * bs <= start && i < int32_t(table.size()); ++i) {
    if (block_keys_[size_t(table[size_t(i)])] != key_of(q, i)) break;
    q.synced = (i + 1) * bs;
  }
}

void DraftModel::forget(std::span<const int32_t> table, int32_t from, int32_t to) {
  const int32_t bs = kv_->shape().block_size;
  for (int32_t b = from / bs; b * bs < to && b < int32_t(table.size()); ++b) block_keys_[size_t(table[size_t(b)])] = 0;
}

void DraftModel::prepare(StepPlan& plan) {
  copy_host_blocks(*kv_, plan.copies);
  for (const auto& [src, dst] : plan.copies) block_keys_[size_t(dst)] = block_keys_[size_t(src)];
  for (seq_id id : plan.retired) seqs_.erase(id);
  for (seq_id id : plan.restored) {  // a swap brought back the target's keys and values only
    if (auto it = seqs_.find(id); it != seqs_.end()) {
      it->second.synced = 0;
      it->second.remembered = 0;
    }
  }
  for (size_t i = 0; i < plan.new_samplers.size(); ++i) {
    SeqTokens& q = seqs_[plan.new_samplers[i].first];
    q = SeqTokens{};
    q.tokens = plan.new_sampler_prompts[i];
    if (i < plan.new_sampler_history.size())
      q.tokens.insert(q.tokens.end(), plan.new_sampler_history[i].begin(), plan.new_sampler_history[i].end());
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
    const auto table = target.block_table(s);
    SeqTokens& q = seqs_[plan.seq_ids[size_t(s)]];
    if (int32_t(q.tokens.size()) < start) {  // tokens it was never shown: trust the cache there
      q.tokens.resize(size_t(start), 0);
      q.synced = start;
      q.shown = false;
    }
    q.tokens.resize(size_t(start));
    q.keys.resize(std::min(q.keys.size(), size_t(start / kv_->shape().block_size)));
    q.synced = std::min(q.synced, start);
    if (tokens.size() > 1 && tokens[1] == kModelDraft) {
      spans_.push_back(s);
      reuse(q, table, start);
      if (q.synced < start) {
        forget(table, q.synced, start);
        caught_up_ += start - q.synced;
        batch_.add_sequence(std::span<const int32_t>(q.tokens).subspan(size_t(q.synced)), q.synced, table, 0,
                            target.seq_prompt_len.empty() ? 0 : target.seq_prompt_len[size_t(s)]);
      }
    } else {
      remember(q, table, q.synced);
      q.tokens.insert(q.tokens.end(), tokens.begin(), tokens.end());
    }
  }
  if (spans_.empty()) return;
  if (batch_.num_seqs() > 0) transformer_->forward(batch_, *kv_, logits_);
  for (int32_t s : spans_) {  // caught up: its positions before the span are known; the span's are written next
    const auto table = target.block_table(s);
    const int32_t start = target.seq_start_pos[size_t(s)];
    remember(seqs_[plan.seq_ids[size_t(s)]], table, start);
    forget(table, start, start + int32_t(target.seq_tokens(s).size()));
  }

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
