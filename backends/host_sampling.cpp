#include "backends/host_sampling.hpp"

#include "backends/mask_prefetch.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace conveyor {

void SamplerTable::apply(const StepPlan& plan) {
  for (seq_id id : plan.retired) samplers_.erase(id);
  for (size_t i = 0; i < plan.new_samplers.size(); ++i) {
    const auto& [id, params] = plan.new_samplers[i];
    auto& sampler = samplers_[id] = std::make_unique<Sampler>(params, plan.new_sampler_prompts[i]);
    if (i < plan.new_sampler_history.size()) sampler->replay(plan.new_sampler_history[i]);
  }
}

void SamplerTable::drop(std::span<const seq_id> ids) {
  for (seq_id id : ids) samplers_.erase(id);
}

Sampler* SamplerTable::find(seq_id id) {
  auto it = samplers_.find(id);
  return it == samplers_.end() ? nullptr : it->second.get();
}

void SampleMemory::prepare(StepPlan& plan) {
  for (seq_id id : plan.retired) last_.erase(id);
  ForwardBatch& b = plan.batch;
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    int32_t& last = b.tokens[size_t(b.seq_token_begin[s + 1] - 1)];
    if (last != -1) continue;  // a token, or a draft model's (kModelDraft)
    auto it = last_.find(plan.seq_ids[size_t(s)]);
    last = it != last_.end() ? it->second : 0;  // 0: a sequence that is gone anyway
  }
}

void SampleMemory::record(const StepResult& result) {
  for (const SampledToken& t : result.tokens) last_[t.seq] = t.result.token;
}

void SampleMemory::drop(std::span<const seq_id> ids) {
  for (seq_id id : ids) last_.erase(id);
}

HostSampling::HostSampling() = default;
// The worker may be preparing a sampler's mask: it finishes (and stops)
// before the samplers go.
HostSampling::~HostSampling() { prefetch_.reset(); }

void HostSampling::prefetch_masks(bool on) {
  if (!on) prefetch_.reset();  // its destructor lets the worker finish
  else if (!prefetch_) prefetch_ = std::make_unique<MaskPrefetch>();
}

uint64_t HostSampling::masks_prepared_ahead() const {
  return prefetch_ ? prefetch_->prepared_by_worker() : 0;
}

void HostSampling::settle() {
  if (prefetch_) prefetch_->finish();
}

SamplerTable& HostSampling::samplers() {
  settle();
  return samplers_;
}

void HostSampling::begin(StepPlan& plan) {
  settle();
  pending_rows_.clear();
  samples_.prepare(plan);
  samplers_.apply(plan);
}

void HostSampling::begin_ahead(StepPlan& plan, const StepPlan& pending, Fills& fills) {
  settle();
  fills.clear();
  pending_rows_.clear();
  const ForwardBatch& p = pending.batch;
  for (int32_t s = 0, row = 0; s < p.num_seqs(); ++s)
    if (p.want_logits[s] && p.seq_token_begin[s + 1] > p.seq_token_begin[s]) pending_rows_[pending.seq_ids[s]] = row++;
  ForwardBatch& b = plan.batch;
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    if (b.seq_token_begin[s + 1] == b.seq_token_begin[s]) continue;
    const int32_t at = b.seq_token_begin[s + 1] - 1;
    if (b.tokens[size_t(at)] >= 0) continue;
    auto it = pending_rows_.find(plan.seq_ids[s]);
    if (it == pending_rows_.end()) continue;  // not pending's: SampleMemory has it
    fills.emplace_back(at, it->second);
    b.tokens[size_t(at)] = 0;
  }
  // Pending's samples of the sequences this plan retires are still to be
  // recorded (and dropped): their samplers and last samples go after that.
  for (seq_id id : plan.retired) {
    const bool restarts = std::any_of(plan.new_samplers.begin(), plan.new_samplers.end(),
                                      [id](const auto& n) { return n.first == id; });
    if (!restarts) retire_after_accept_.push_back(id);
  }
  std::vector<seq_id> retired = std::move(plan.retired);
  plan.retired.clear();
  samples_.prepare(plan);
  samplers_.apply(plan);
  plan.retired = std::move(retired);
}

void HostSampling::recorded() {
  pending_rows_.clear();  // what begin_ahead's plan awaited is in the samplers now
  samplers_.drop(retire_after_accept_);
  samples_.drop(retire_after_accept_);
  retire_after_accept_.clear();
}

void HostSampling::clear() {
  settle();
  samplers_.clear();
  samples_.clear();
  retire_after_accept_.clear();
  pending_rows_.clear();
}

void HostSampling::sample(const StepPlan& plan, float* logits_data, int32_t vocab, StepResult& result) {
  settle();
  rows_.clear();
  int32_t row = 0;
  size_t next_fork = 0;
  for (int32_t s = 0; s < plan.batch.num_seqs(); ++s) {
    const int32_t count = plan.batch.want_logits[s];
    if (count == 0) continue;
    std::span<float> logits(logits_data + size_t(row) * vocab, size_t(vocab) * size_t(count));
    row += count;
    const seq_id seq = plan.seq_ids[s];
    Sampler* sampler = samplers_.find(seq);  // null: retired while the plan was built
    const bool forking = next_fork < plan.forks.size() && plan.forks[next_fork].first == seq;
    if (!forking) {
      // A verify step's drafts: the span's tokens after the first row's.
      const std::span<const int32_t> tokens = plan.batch.seq_tokens(s);
      const auto drafts = tokens.subspan(tokens.size() - size_t(count) + 1);
      if (sampler != nullptr) rows_.push_back(Row{seq, sampler, logits, drafts, {}});
      continue;
    }
    logits = logits.first(size_t(vocab));  // a first token: no drafts to verify (the scheduler plans none)
    // Forked samples draw from this row too; sampling overwrites it, so each
    // takes a copy of the raw logits.
    raw_.assign(logits.begin(), logits.end());
    if (sampler != nullptr) result.tokens.push_back(SampledToken{seq, sampler->sample(logits)});
    for (; next_fork < plan.forks.size() && plan.forks[next_fork].first == seq; ++next_fork) {
      Sampler* child = samplers_.find(plan.forks[next_fork].second);
      if (child == nullptr) continue;
      fork_logits_ = raw_;
      result.tokens.push_back(SampledToken{plan.forks[next_fork].second, child->sample(fork_logits_)});
    }
  }
  const size_t first = result.tokens.size();
  result.tokens.resize(first + rows_.size());
#pragma omp parallel for schedule(dynamic, 4) if (rows_.size() > 8)
  for (size_t i = 0; i < rows_.size(); ++i) {
    Row& r = rows_[i];
    const auto row_logits = [&](size_t k) { return r.logits.subspan(k * size_t(vocab), size_t(vocab)); };
    result.tokens[first + i] = SampledToken{r.seq, r.sampler->sample(row_logits(0))};
    // Verifying drafts: row k + 1 saw draft k as its input, so while the
    // sample equals it the next row is this sequence's next distribution.
    r.verified.clear();
    for (size_t k = 0; k < r.drafts.size(); ++k) {
      const int32_t sampled = k == 0 ? result.tokens[first + i].result.token : r.verified.back().result.token;
      if (sampled != r.drafts[k]) break;
      r.verified.push_back(SampledToken{r.seq, r.sampler->sample(row_logits(k + 1))});
    }
  }
  for (Row& r : rows_)  // after every sequence's first: each sequence's tokens stay in order
    for (SampledToken& t : r.verified) result.tokens.push_back(std::move(t));
  samples_.record(result);
  recorded();
  if (prefetch_) {  // the constrained samplers' next masks, while the next forward pass runs
    std::vector<Sampler*> constrained;
    for (const SampledToken& t : result.tokens)
      if (Sampler* s = samplers_.find(t.seq); s != nullptr && s->params().grammar.compiled) constrained.push_back(s);
    prefetch_->start(std::move(constrained));
  }
}

void HostSampling::DeviceInputs::clear() {
  for (std::vector<float>* v : {&temperature, &min_p, &top_p, &repetition, &frequency, &presence}) v->clear();
  uniforms.clear();
  for (std::vector<int32_t>* v : {&top_k, &seen_begin, &seen, &gen_begin, &generated, &gen_counts, &previous_row})
    v->clear();
  penalties = false;
}

bool HostSampling::device_inputs(const StepPlan& plan, DeviceInputs& in) {
  settle();
  if (!plan.forks.empty()) return false;
  for (int32_t s = 0; s < plan.batch.num_seqs(); ++s) {
    if (!plan.batch.want_logits[s]) continue;
    const Sampler* sampler = samplers_.find(plan.seq_ids[s]);
    if (sampler != nullptr && !sampler->device_samplable()) return false;
  }
  in.clear();
  in.seen_begin.push_back(0);
  in.gen_begin.push_back(0);
  for (int32_t s = 0; s < plan.batch.num_seqs(); ++s) {
    if (!plan.batch.want_logits[s]) continue;
    Sampler* sampler = samplers_.find(plan.seq_ids[s]);
    SamplingParams greedy;  // a row whose sequence retired: any token will do
    greedy.temperature = 0.0f;
    const SamplingParams& p = sampler != nullptr ? sampler->params() : greedy;
    in.temperature.push_back(p.temperature);
    in.min_p.push_back(p.min_p);
    in.top_p.push_back(p.top_p);
    in.top_k.push_back(p.top_k);
    in.repetition.push_back(p.repetition_penalty);
    in.frequency.push_back(p.frequency_penalty);
    in.presence.push_back(p.presence_penalty);
    in.uniforms.push_back(sampler != nullptr ? sampler->device_uniform() : 0.0);
    if (sampler != nullptr) {
      if (p.repetition_penalty != 1.0f) {
        const auto seen = sampler->seen_tokens();
        in.seen.insert(in.seen.end(), seen.begin(), seen.end());
      }
      if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
        for (const auto& [token, count] : sampler->generated_counts()) {
          in.generated.push_back(token);
          in.gen_counts.push_back(count);
        }
      }
      const bool penalised =
          p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
      in.penalties = in.penalties || penalised;
      const auto previous = penalised ? pending_rows_.find(plan.seq_ids[s]) : pending_rows_.end();
      in.previous_row.push_back(previous != pending_rows_.end() ? previous->second : -1);
    } else {
      in.previous_row.push_back(-1);
    }
    in.seen_begin.push_back(int32_t(in.seen.size()));
    in.gen_begin.push_back(int32_t(in.generated.size()));
  }
  return true;
}

void HostSampling::accept(const StepPlan& plan, const int32_t* tokens, StepResult& result) {
  settle();
  int32_t row = 0;
  for (int32_t s = 0; s < plan.batch.num_seqs(); ++s) {
    if (!plan.batch.want_logits[s]) continue;
    const int32_t token = tokens[row++];
    Sampler* sampler = samplers_.find(plan.seq_ids[s]);
    if (sampler == nullptr) continue;
    sampler->accept(token);
    SampledToken t;
    t.seq = plan.seq_ids[s];
    t.result.token = token;
    result.tokens.push_back(std::move(t));
  }
  samples_.record(result);
  recorded();
}

}  // namespace conveyor
