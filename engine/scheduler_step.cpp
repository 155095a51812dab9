// SchedulerCore's steps: the plan an iteration sends the runner (prompt
// chunks, decodes, verify spans of drafted tokens, forks of n > 1 samples),
// what its result does to the sequences, the drafts proposed for
// speculation, and prompt logprobs.
#include <algorithm>
#include <span>
#include <string>
#include <utility>

#include "engine/scheduler_core.hpp"
#include "grammar/matcher.hpp"

namespace conveyor {

// ---- the step -------------------------------------------------------------------

StepPlan SchedulerCore::build_step() {
  StepPlan plan;
  plan.iteration = iteration_;
  plan.seq_ids.reserve(plan_.size());
  plan.batch.seq_start_pos.reserve(plan_.size());
  plan.batch.seq_token_begin.reserve(plan_.size() + 1);
  plan.batch.block_table_begin.reserve(plan_.size() + 1);
  plan.batch.want_logits.reserve(plan_.size());
  plan.batch.seq_prompt_len.reserve(plan_.size());
  plan.batch.tokens.reserve(plan_.size());
  plan.batch.block_tables.reserve(block_table_hint_);
  // KV utilization: tokens with KV (after this step) over the slots of all
  // device blocks held by running sequences; summed here while the plan
  // holds all of them.
  uint64_t live = 0, slots = 0;
  size_t counted = 0;
  auto count_kv = [&](const Sequence& s) {
    live += uint64_t(s.scheduled);
    slots += uint64_t(s.blocks_held) * uint64_t(config_.block_size);
  };
  for (Planned& p : plan_) {
    if (!p.granted || p.dropped) continue;
    Sequence& s = seqs_.at(p.id);
    const int32_t len = s.length();
    if (p.drafts > 0 && (len - s.scheduled != 1 || int32_t(s.drafts.size()) != p.drafts)) p.drafts = 0;
    const int32_t n = std::min(p.max_new, len - s.scheduled + p.drafts);
    if (n <= 0) {
      p.dropped = true;
      continue;
    }
    p.max_new = n;
    const bool last = s.scheduled + n - p.drafts == len;
    p.samples = last;
    std::span<const int32_t> span(s.tokens);
    if (p.drafts > 0) {  // its last token, then the drafts this step verifies
      scratch_tokens_.assign(1, s.tokens.back());
      scratch_tokens_.insert(scratch_tokens_.end(), s.drafts.begin(), s.drafts.end());
      span = scratch_tokens_;
    } else if (s.scheduled + n <= int32_t(s.tokens.size())) {
      span = span.subspan(size_t(s.scheduled), size_t(n));
    } else {  // ends with the token an outstanding step samples
      scratch_tokens_.assign(s.tokens.begin() + std::min(s.scheduled, int32_t(s.tokens.size())), s.tokens.end());
      scratch_tokens_.resize(size_t(n), -1);
      span = scratch_tokens_;
    }
    plan.batch.add_sequence(span, s.scheduled, s.block_table, last ? 1 + p.drafts : 0, s.prompt_len);
    plan.seq_ids.push_back(s.id);
    if (s.prompt_scoring.pending()) plan_scoring(s, s.scheduled, n, plan);
    s.scheduled += n;
    s.last_plan = iteration_;
    if (!s.runner_has_sampler) {
      s.runner_has_sampler = true;
      plan.new_samplers.emplace_back(s.id, s.sampling);
      plan.new_sampler_prompts.emplace_back(s.tokens.begin(), s.tokens.begin() + s.prompt_len);
      plan.new_sampler_history.emplace_back(s.tokens.begin() + s.prompt_len, s.tokens.end());
    }
    if (last && s.samples > 1 && s.state() != SeqState::forking) plan_forks(s, plan);
    if (last) ++s.unconfirmed;
    count_kv(s);
    ++counted;
  }
  if (plan.batch.num_seqs() == 0) {  // not sent: copies and retirements wait for the next
    plan_.clear();
    return plan;
  }
  plan.copies = std::move(copies_);
  copies_.clear();
  plan.retired = std::move(retired_samplers_);
  retired_samplers_.clear();
  plan.restored = std::move(restored_);
  restored_.clear();
  block_table_hint_ = plan.batch.block_tables.size();
  flights_.push_back(Flight{iteration_, std::exchange(plan_, std::move(spare_plan_)), std::move(step_forks_)});
  plan_.clear();
  step_forks_.clear();
  if (counted != running_.size()) {  // some sit this step out: count them all
    live = slots = 0;
    for (seq_id id : running_)
      if (const Sequence& s = seqs_.at(id); s.in_batch()) count_kv(s);
  }
  if (slots > 0) {
    kv_live_sum_ += live;
    kv_slots_sum_ += slots;
  }
  return plan;
}

bool SchedulerCore::can_build() const {
  return flights_.empty() || (config_.overlap && flights_.size() == 1 && !drain_requested_ && !wants_drafts());
}

// A verify step needs its sequence's last token, which a plan built while
// the step that samples it runs cannot have: while some sequence is likely
// to draft, the next plan waits for the outstanding step. So it does while
// a sequence verifies drafts in the outstanding step, whose position is
// open until that step's result says how many it accepted.
bool SchedulerCore::wants_drafts() const {
  if (!config_.speculative.drafts()) return false;
  int32_t decodes = 0;
  bool drafting = false;
  for (seq_id id : running_) {
    const Sequence& s = seqs_.at(id);
    if (!s.in_batch() || s.length() - s.scheduled > 1) continue;
    if (s.scheduled > s.length()) return true;  // verifies drafts in the outstanding step: its position is open
    ++decodes;
    drafting = drafting || (s.state() == SeqState::running && s.draft_length.pause == 0 && likely_proposes(s));
  }
  return drafting && decodes <= config_.speculative.disable_batch;
}

// Jump-forward and a draft model may always draft. Prompt lookup drafts
// when the tail of the tokens occurred before; while the last token is
// being sampled, whether the tail before it did predicts that (text that
// repeats goes on repeating), so a sequence in text its proposer cannot
// continue lets the next plan be built ahead, as without speculation.
bool SchedulerCore::likely_proposes(const Sequence& s) const {
  const SpeculativeConfig& c = config_.speculative;
  if (jumps_forward(s)) return true;
  if (!c.enabled()) return false;
  if (c.method == SpeculativeMethod::draft) return !s.sampling.grammar.compiled;
  // A longer tail occurred only where the shortest did: one scan for it.
  if (propose_ngram(s.tokens, c.ngram_min, c.ngram_min, 1, probe_drafts_) > 0) return true;
  return suffix_store_ && suffix_store_->propose(s.tokens, 1, probe_drafts_) > 0;
}

// The step that samples a parent's first token samples its other n - 1
// samples too, each with its own sampler (seed + index when seeded).
void SchedulerCore::plan_forks(Sequence& parent, StepPlan& plan) {
  parent.plan_fork();
  for (int32_t i = 1; i < parent.samples; ++i) {
    const seq_id child = next_sample_id_++;
    SamplingParams params = parent.sampling;
    if (params.has_seed) params.seed += uint64_t(i);
    plan.new_samplers.emplace_back(child, std::move(params));
    plan.new_sampler_prompts.emplace_back(parent.tokens.begin(), parent.tokens.begin() + parent.prompt_len);
    plan.new_sampler_history.emplace_back();
    plan.forks.emplace_back(parent.id, child);
    step_forks_.push_back(Fork{parent.id, child, i});
  }
}

// The forks of a step that completed become sequences holding the parent's
// prompt blocks (the block manager forks them first thing in the next batch).
// The parent sat out the steps planned meanwhile, so it holds exactly its
// prompt, whose KV is computed now.
void SchedulerCore::apply_forks(const std::vector<Fork>& forks) {
  for (const Fork& f : forks) {
    Sequence* parent = find(f.parent);
    if (parent == nullptr || is_cancelled(parent->id)) {  // it ends all its samples itself
      retired_samplers_.push_back(f.child);
      continue;
    }
    if (parent->state() == SeqState::forking) parent->forked();  // its first fork ends its wait
    Sequence child = *parent;
    child.id = f.child;
    child.index = f.index;
    child.samples = 1;
    child.plan_slot = -1;
    child.prefix.hashes.clear();  // the parent's
    child.tokens.resize(size_t(parent->prompt_len));
    child.num_computed = child.scheduled = child.slots = parent->prompt_len;
    child.unconfirmed = 0;
    child.last_plan = 0;
    child.drafts.clear();
    child.draft_length = {};
    child.grammar_matcher.reset();  // the parent's: the child feeds one of its own
    child.grammar_fed = 0;
    child.block_table.resize(size_t(blocks_for(parent->prompt_len)));
    child.blocks_held = int32_t(child.block_table.size());
    if (child.sampling.has_seed) child.sampling.seed += uint64_t(f.index);
    groups_.at(parent->request).seqs.push_back(f.child);
    running_.push_back(f.child);
    pending_forks_.push_back(SeqFork{f.parent, f.child});
    seqs_.emplace(f.child, std::move(child));  // `parent` stays valid: map nodes do not move
    if (parent->samples > 1) --multi_sample_seqs_;
    parent->samples = 1;
  }
}

void SchedulerCore::apply_step(const StepResult& result, double now) {
  (void)now;
  if (flights_.empty() || flights_.front().iteration != result.iteration) return;  // not an outstanding step
  Flight flight = std::move(flights_.front());
  flights_.erase(flights_.begin());
  last_applied_ = flight.iteration;
  observe_cost(flight, result.forward_seconds);
  for (const Planned& p : flight.planned) {
    if (!p.granted || p.dropped) continue;
    Sequence* s = find(p.id);
    if (s == nullptr) continue;
    if (p.drafts > 0) {
      const auto emitted = std::count_if(result.tokens.begin(), result.tokens.end(),
                                         [&](const SampledToken& t) { return t.seq == p.id; });
      apply_verified(*s, p, int32_t(emitted));
    } else {
      s->num_computed += p.max_new;
    }
    if (p.samples) --s->unconfirmed;
    tell_progress(*s);
  }
  apply_scores(result.prompt_scores);  // before the forks copy them
  apply_forks(flight.forks);
  for (const SampledToken& t : result.tokens) {
    Sequence* s = find(t.seq);
    if (s == nullptr || is_cancelled(s->id)) continue;
    const int32_t token = t.result.token;
    const bool padded = config_.batching == BatchingMode::static_padded;
    if (s->state() == SeqState::padding) {  // its token only feeds its next step
      if (s->length() >= config_.context_length) {
        retire_padding(*s);
        continue;
      }
      append_token(*s, token);
      continue;
    }
    if (is_stop(*s, token)) {
      s->stop_tokens = 1;
      if (padded && s->length() < config_.context_length) {
        end_into_padding(*s, FinishReason::stop, token);
        continue;
      }
      remove_running(s->id);
      finish(*s, FinishReason::stop);
      continue;
    }
    append_token(*s, token);
    TokenEvent e;
    e.id = s->request;
    e.index = s->index;
    e.token = token;
    e.logprob = t.result.logprob;
    if (!t.result.top.empty()) e.detail.get_or_make().top = t.result.top;
    if (std::vector<PromptLogprob> scores = take_prompt_scores(*s); !scores.empty())
      e.detail.get_or_make().prompt_logprobs = std::move(scores);
    events_.push_back(std::move(e));
    if (s->generated() >= s->sampling.max_tokens ||
        int32_t(s->tokens.size()) >= config_.context_length) {
      if (padded && int32_t(s->tokens.size()) < config_.context_length) {
        end_into_padding(*s, FinishReason::length, -1);
        continue;
      }
      remove_running(s->id);
      finish(*s, FinishReason::length);
    }
  }
  flight.planned.clear();
  if (flight.planned.capacity() > spare_plan_.capacity()) spare_plan_ = std::move(flight.planned);
  // Blocks that only this step still used can go back now.
  std::erase_if(deferred_frees_, [this](const DeferredFree& d) {
    if (d.after > last_applied_) return false;
    pending_frees_.push_back(d.seq);
    pending_free_blocks_ += d.blocks;
    return true;
  });
}

// What the step cost, for the latency target's model: a decode is a running
// sequence's one token that it samples from (or a verify span's tokens).
void SchedulerCore::observe_cost(const Flight& flight, double seconds) {
  if (config_.target_itl_seconds <= 0) return;
  int32_t decode = 0, prefill = 0;
  for (const Planned& p : flight.planned) {
    if (!p.granted || p.dropped) continue;
    // A verify span (its last token and drafts) costs what as many decodes do.
    (p.samples && !p.is_new && p.max_new == 1 + p.drafts ? decode : prefill) += p.max_new;
  }
  cost_.observe(decode, prefill, seconds);
}

// ---- prompt logprobs ------------------------------------------------------------

// Positions q of the span [start, start + n) that predict a prompt token
// (q + 1 < prompt_len) not scored yet. Spans of one admission never
// overlap; after a recompute, positions already scored are not asked again.
void SchedulerCore::plan_scoring(const Sequence& s, int32_t start, int32_t n, StepPlan& plan) const {
  const int32_t from = std::max(start, int32_t(s.prompt_scoring.scores.size()));
  const int32_t to = std::min(start + n, s.prompt_len - 1);
  if (to <= from) return;
  PromptScoring p;
  p.slot = plan.batch.num_seqs() - 1;
  p.row_offset = from - start;
  p.first = from + 1;
  p.top = s.prompt_scoring.top;
  p.targets.assign(s.tokens.begin() + from + 1, s.tokens.begin() + to + 1);
  plan.score.push_back(std::move(p));
}

void SchedulerCore::apply_scores(const std::vector<PromptScores>& scores) {
  for (const PromptScores& in : scores) {
    Sequence* s = find(in.seq);
    if (s == nullptr || !s->prompt_scoring.pending()) continue;
    std::vector<PromptLogprob>& have = s->prompt_scoring.scores;
    // Entries before the next missing token were scored before a recompute.
    const auto skip = int64_t(have.size()) + 1 - in.first;
    if (skip < 0 || skip >= int64_t(in.entries.size())) continue;
    have.insert(have.end(), in.entries.begin() + skip, in.entries.end());
  }
}

// Whole (every prompt token after the first scored) or nothing: a sequence
// that ends before its prefill does (cancelled, refused) has no scores to give.
std::vector<PromptLogprob> SchedulerCore::take_prompt_scores(Sequence& s) const {
  Sequence::PromptScoring& p = s.prompt_scoring;
  if (!p.pending() || int32_t(p.scores.size()) != s.prompt_len - 1) return {};
  p.delivered = true;
  return std::exchange(p.scores, {});
}

// ---- speculation ----------------------------------------------------------------

int32_t SchedulerCore::propose_drafts(Sequence& s, int32_t room) {
  s.drafts.clear();
  // Its last token must be known (no step outstanding samples it), and the
  // step may emit all its drafts and one more within max_tokens and the
  // context. Its first token comes from a plain step: that is where a
  // request with n > 1 forks, every sample from the same row.
  if (s.state() != SeqState::running || s.unconfirmed > 0 || s.scheduled + 1 != int32_t(s.tokens.size()) ||
      s.generated() < 1 || s.samples > 1)
    return 0;
  const SpeculativeConfig& c = config_.speculative;
  if (s.draft_length.next == 0) s.draft_length.next = c.num_tokens;
  const int32_t k = std::min({s.draft_length.next, room, s.sampling.max_tokens - s.generated() - 1,
                              config_.context_length - int32_t(s.tokens.size()) - 1});
  if (k <= 0 || !proposes(s)) return 0;
  if (jumps_forward(s)) {
    if (grammar::Matcher* m = synced_matcher(s)) {
      propose_forced(*s.sampling.grammar.compiled, *m, k, s.drafts);
      if (!s.drafts.empty()) return int32_t(s.drafts.size());
    }
  }
  if (!c.enabled()) return 0;
  if (c.method == SpeculativeMethod::draft) {
    // The runner's draft model writes them (kModelDraft); not under a
    // grammar, which would have to check tokens the scheduler never sees.
    if (s.sampling.grammar.compiled) return 0;
    s.drafts.assign(size_t(k), kModelDraft);
    return k;
  }
  const int32_t own = propose_ngram(s.tokens, c.ngram_min, c.ngram_max, k, s.drafts);
  if (suffix_store_ && own < c.ngram_max) {  // recent requests may hold a longer match
    if (suffix_store_->propose(s.tokens, k, scratch_drafts_) > own) s.drafts.swap(scratch_drafts_);
  }
  // Under a grammar, drafts stop at the first one it refuses there: its
  // row could only be rejected.
  if (!s.drafts.empty() && s.sampling.grammar.compiled && !s.grammar_lost) {
    if (grammar::Matcher* m = synced_matcher(s)) {
      size_t valid = 0;
      while (valid < s.drafts.size() && m->accept_token(s.drafts[valid])) ++valid;
      m->rollback(int32_t(valid));
      s.drafts.resize(valid);
    }
  }
  return int32_t(s.drafts.size());
}

bool SchedulerCore::proposes(const Sequence& s) const { return config_.speculative.enabled() || jumps_forward(s); }

bool SchedulerCore::jumps_forward(const Sequence& s) const {
  return config_.speculative.jump_forward && s.sampling.grammar.compiled && !s.grammar_lost;
}

grammar::Matcher* SchedulerCore::synced_matcher(Sequence& s) {
  if (!s.grammar_matcher || s.grammar_fed > s.generated()) {
    s.grammar_matcher = std::make_shared<grammar::Matcher>(s.sampling.grammar.compiled);
    s.grammar_fed = 0;
  }
  for (; s.grammar_fed < s.generated(); ++s.grammar_fed) {
    if (!s.grammar_matcher->accept_token(s.tokens[size_t(s.prompt_len + s.grammar_fed)])) {
      s.grammar_lost = true;  // not the sampler's grammar state: leave it alone
      s.grammar_matcher.reset();
      return nullptr;
    }
  }
  return s.grammar_matcher.get();
}

void SchedulerCore::apply_verified(Sequence& s, const Planned& p, int32_t emitted) {
  const int32_t accepted = std::clamp(emitted - 1, 0, p.drafts);
  // The rejected drafts' positions were computed for nothing: they are
  // scheduled again with the tokens that replace them.
  s.num_computed += 1 + accepted;
  s.scheduled -= p.drafts - accepted;
  s.draft_length.update(p.drafts, accepted, config_.speculative.num_tokens);
  speculation_.drafts += 1;
  speculation_.draft_tokens += uint64_t(p.drafts);
  speculation_.accepted_tokens += uint64_t(accepted);
}

}  // namespace conveyor
