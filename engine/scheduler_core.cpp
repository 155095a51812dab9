// SchedulerCore: requests in and out, admission, the block manager's
// allocations and preemption, sessions and swap. Its steps are in
// scheduler_step.cpp, recovery from faults in scheduler_faults.cpp and the
// priority policy in scheduler_priority.cpp.
#include "engine/scheduler_core.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace conveyor {

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::none: return "none";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "unknown";
}

SchedulerCore::SchedulerCore(SchedulerConfig config)
    : config_(std::move(config)),
      waiting_(config_.aging_interval_seconds),
      free_blocks_(config_.num_blocks),
      free_host_blocks_(config_.num_host_blocks) {
  if (config_.speculative.method == SpeculativeMethod::suffix && config_.speculative.num_tokens > 0)
    suffix_store_ = std::make_unique<SuffixStore>(kSuffixStoreTokens, config_.speculative.ngram_min,
                                                  config_.speculative.ngram_max);
}

int32_t SchedulerCore::blocks_for(int32_t tokens) const {
  return (tokens + config_.block_size - 1) / config_.block_size;
}

int32_t SchedulerCore::free_estimate() const {
  int32_t free = free_blocks_ + pending_free_blocks_;
  for (seq_id id : pending_swap_out_done_) {
    auto it = seqs_.find(id);
    if (it != seqs_.end()) free += it->second.blocks_held;
  }
  return free;
}

Sequence* SchedulerCore::find(seq_id id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

void SchedulerCore::erase_sequence(seq_id id) {
  if (auto it = seqs_.find(id); it != seqs_.end() && it->second.samples > 1) --multi_sample_seqs_;
  seqs_.erase(id);
  std::erase(cancelled_, id);
}

bool SchedulerCore::is_cancelled(seq_id id) const {
  return std::find(cancelled_.begin(), cancelled_.end(), id) != cancelled_.end();
}

bool SchedulerCore::is_stop(const Sequence& s, int32_t token) const {
  const auto& stops = s.sampling.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return true;
  if (s.sampling.ignore_eos) return false;
  return std::find(config_.eos_ids.begin(), config_.eos_ids.end(), token) != config_.eos_ids.end();
}

// ---- requests ---------------------------------------------------------------

Status SchedulerCore::submit(GenerateRequest r, double now) {
  const auto n = int32_t(r.prompt.size());
  if (n == 0) return make_error(Errc::invalid_argument, "the prompt is empty");
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= config_.vocab_size)
      return make_error(Errc::invalid_argument,
                        "prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                            std::to_string(config_.vocab_size) + ")");
  }
  if (!r.resume.empty() && r.n != 1)
    return make_error(Errc::invalid_argument, "a request that resumes generated tokens must have n = 1");
  for (int32_t t : r.resume) {
    if (t < 0 || t >= config_.vocab_size)
      return make_error(Errc::invalid_argument, "resumed token id " + std::to_string(t) +
                                                    " is outside the vocabulary [0, " +
                                                    std::to_string(config_.vocab_size) + ")");
  }
  if (n + int32_t(r.resume.size()) >= config_.context_length && !r.resume.empty())
    return make_error(Errc::invalid_argument, "the prompt and the resumed tokens fill the model's context");
  if (n >= config_.context_length)
    return make_error(Errc::invalid_argument,
                      "the prompt has " + std::to_string(n) + " tokens; the model's context is " +
                          std::to_string(config_.context_length));
  if (const int32_t len = n + int32_t(r.resume.size()); blocks_for(len + 1) > config_.num_blocks)
    return make_error(Errc::invalid_argument,
                      "the prompt needs " + std::to_string(blocks_for(len + 1)) +
                          " KV blocks; the cache holds " + std::to_string(config_.num_blocks));
  if (Status s = validate(r.sampling, config_.vocab_size); !s) return s;
  if (r.prompt_logprobs < -1 || r.prompt_logprobs > kMaxLogprobs)
    return make_error(Errc::invalid_argument, "prompt_logprobs must be between 0 and " +
                                                  std::to_string(kMaxLogprobs) + ", got " +
                                                  std::to_string(r.prompt_logprobs));
  if (r.prompt_logprobs >= 0 && !config_.prompt_logprobs)
    return make_error(Errc::invalid_argument,
                      "prompt_logprobs: this engine's backend does not compute prompt logprobs "
                      "(the CPU backend does)");
  if (const int32_t most = std::min(config_.max_num_seqs, kMaxSamples); r.n < 1 || r.n > most)
    return make_error(Errc::invalid_argument, "n must be between 1 and " + std::to_string(most) +
                                                  " (the engine's max_num_seqs), got " + std::to_string(r.n));
  if (r.id >= (r.automatic_id ? kFirstSampleSeqId : kFirstAutomaticRequestId))
    return make_error(Errc::invalid_argument,
                      "request ids must be below 2^62 (the engine numbers requests that come "
                      "without an id from 2^62 up)");
  if (seqs_.count(r.id) || groups_.count(r.id))
    return make_error(Errc::invalid_argument, "duplicate request id");
  if (r.priority != 0 && config_.scheduling_policy != SchedulingPolicy::priority)
    return make_error(Errc::invalid_argument,
                      "priority " + std::to_string(r.priority) +
                          " needs the priority scheduling policy (--scheduling-policy priority, "
                          "where a lower value runs sooner); under fcfs it must be 0");
  if (int32_t(waiting_.size()) >= config_.max_waiting)
    return make_error(Errc::resource_exhausted,
                      "the waiting queue is full (" + std::to_string(config_.max_waiting) +
                          " requests); try again later");

  Sequence s;
  s.id = r.id;
  s.request = r.id;
  s.samples = r.n;
  s.priority = r.priority;
  s.tenant = std::move(r.tenant);
  s.arrival = next_arrival_++;
  s.arrival_time = now;
  s.prompt_len = n;
  s.tokens = std::move(r.prompt);
  s.tokens.insert(s.tokens.end(), r.resume.begin(), r.resume.end());
  s.sampling = std::move(r.sampling);
  // No longer than the model's context, nor than the whole KV cache holds:
  // a sequence that reaches either ends with "length" when its token that
  // does arrives, whether the scheduler plans ahead or not and however many
  // tokens a step verifies (a verify step that asked for slots past the
  // cache could never have them: it preempted its own sequence, forever).
  const int64_t cache_tokens = int64_t(config_.num_blocks) * config_.block_size;
  s.sampling.max_tokens = int32_t(std::min<int64_t>({s.sampling.max_tokens, config_.context_length - n,
                                                     cache_tokens - n}));
  if (s.generated() >= s.sampling.max_tokens)
    return make_error(Errc::invalid_argument, "the resumed tokens already reach max_tokens");
  if (r.n == 1) s.session = std::move(r.session);
  // A resumed request delivered its prompt's logprobs with its first token.
  if (r.resume.empty()) s.prompt_scoring.top = r.prompt_logprobs;
  if (r.n > 1) {
    groups_.emplace(r.id, Group{{r.id}, r.n});
    ++multi_sample_seqs_;
  }
  waiting_.push(WaitingEntry{s.id, s.priority, s.arrival, now});
  seqs_.emplace(s.id, std::move(s));
  return Status::ok();
}

void SchedulerCore::cancel(request_id id) {
  if (id >= kFirstSampleSeqId) return;  // not a request's id
  if (auto g = groups_.find(id); g != groups_.end()) {
    for (seq_id seq : g->second.seqs) cancel_sequence(seq);
    return;
  }
  cancel_sequence(id);
}

void SchedulerCore::cancel_sample(request_id id, int32_t index) {
  if (id >= kFirstSampleSeqId || index < 0) return;
  if (auto g = groups_.find(id); g != groups_.end()) {
    if (size_t(index) < g->second.seqs.size() && g->second.seqs.size() > 1)
      cancel_sequence(g->second.seqs[size_t(index)]);
    return;
  }
  if (index == 0) cancel_sequence(id);
}

void SchedulerCore::cancel_sequence(seq_id id) {
  Sequence* s = find(id);
  if (s == nullptr || is_cancelled(id) || s->state() == SeqState::padding) return;
  cancelled_.push_back(id);
}

bool SchedulerCore::close_sample(request_id request) {
  auto g = groups_.find(request);
  if (g == groups_.end()) return true;
  if (--g->second.open > 0) return false;
  groups_.erase(g);
  return true;
}

void SchedulerCore::finish(Sequence& s, FinishReason reason, std::string message, Errc code) {
  emit_final(s, reason, message, code);
  release_claims(s);
  if ((reason == FinishReason::stop || reason == FinishReason::length) && !s.session.empty()) keep_for_session(s);
  if ((reason == FinishReason::stop || reason == FinishReason::length) && suffix_store_) suffix_store_->add(s.tokens);
  if (s.runner_has_sampler) retired_samplers_.push_back(s.id);
  if (s.in_batch()) tell_progress(s);  // its last full blocks enter the prefix cache too
  release_blocks(s);
  finished_.push_back({s.id, s.generated(), reason});
  erase_sequence(s.id);  // `s` dangles from here on
}

void SchedulerCore::emit_final(Sequence& s, FinishReason reason, const std::string& message,
                               Errc code) {
  const std::vector<PromptLogprob> scores = take_prompt_scores(s);
  // A request that ends before its first token ends all its samples.
  for (int32_t i = 0; i < s.samples; ++i) {
    TokenEvent e;
    e.id = s.request;
    e.index = s.samples > 1 ? i : s.index;
    e.finish = reason;
    TokenEventDetail& d = e.detail.get_or_make();
    d.prompt_tokens = s.prompt_len;
    d.cached_prompt_tokens = s.cached_prompt_tokens.value_or(0);
    d.completion_tokens = s.generated() + s.stop_tokens;
    d.stop_tokens = s.stop_tokens;
    d.message = message;
    if (reason == FinishReason::error) e.error_code = code;
    d.prompt_logprobs = scores;
    e.request_done = close_sample(s.request);
    events_.push_back(std::move(e));
  }
}

void SchedulerCore::append_token(Sequence& s, int32_t token) { s.tokens.push_back(token); }

void SchedulerCore::tell_progress(Sequence& s) {
  const int32_t bs = config_.block_size;
  // Computed positions whose tokens are in: all but accepted drafts whose
  // tokens this step's result has yet to append.
  const int32_t known = std::min(s.num_computed, int32_t(s.tokens.size()));
  if (known / bs <= s.committed / bs) return;
  const int32_t first = s.committed / bs * bs, end = known / bs * bs;
  const auto begin = int32_t(pending_progress_tokens_.size());
  pending_progress_tokens_.insert(pending_progress_tokens_.end(), s.tokens.begin() + first, s.tokens.begin() + end);
  pending_computed_.push_back(SeqProgress{s.id, known, first, begin, int32_t(pending_progress_tokens_.size())});
  s.committed = known;
}

void SchedulerCore::end_into_padding(Sequence& s, FinishReason reason, int32_t stop_token) {
  emit_final(s, reason, {});
  finished_.push_back({s.id, s.generated(), reason});
  if (stop_token >= 0) append_token(s, stop_token);  // the next step's input
  s.end_into_padding();
  ++num_padding_;
}

void SchedulerCore::retire_padding(Sequence& s) {
  if (Planned* p = planned_for(s)) p->dropped = true;
  release_claims(s);
  if (s.runner_has_sampler) retired_samplers_.push_back(s.id);
  release_blocks(s);
  remove_running(s.id);
  --num_padding_;
  erase_sequence(s.id);
}

void SchedulerCore::drop_padding() {
  const std::vector<seq_id> running = running_;
  for (seq_id id : running) {
    Sequence* s = find(id);
    if (s != nullptr && s->state() == SeqState::padding) retire_padding(*s);
  }
}

void SchedulerCore::release_blocks(const Sequence& s) {
  if (s.blocks_held == 0 && s.state() != SeqState::swapped) return;
  const int32_t device_blocks = s.state() == SeqState::swapped ? 0 : s.blocks_held;
  if (s.last_plan > last_applied_) {  // an outstanding step still reads and writes them
    deferred_frees_.push_back(DeferredFree{s.last_plan, s.id, device_blocks});
    return;
  }
  pending_frees_.push_back(s.id);
  pending_free_blocks_ += device_blocks;
}

void SchedulerCore::remove_running(seq_id id) {
  auto it = std::find(running_.begin(), running_.end(), id);
  if (it != running_.end()) running_.erase(it);
}

// ---- one iteration ----------------------------------------------------------

std::optional<AdmissionQuery> SchedulerCore::begin_iteration(double now) {
  ++iteration_;
  now_ = now;
  if (flights_.empty()) drain_requested_ = false;
  plan_.clear();
  failed_.clear();
  pending_swap_in_.clear();
  blocked_head_ = 0;
  expire_sessions(now);

  // Cancelled sequences leave now, wherever they are; those in the middle of
  // a copy leave when it completes (on_swap_done). (A padding row cannot be
  // cancelled: it has ended for its client.)
  const std::vector<seq_id> cancelled = cancelled_;
  for (seq_id id : cancelled) {
    Sequence* s = find(id);
    if (s == nullptr) continue;
    switch (s->state()) {
      case SeqState::waiting: waiting_.remove(id); [[fallthrough]];
      case SeqState::running:
      case SeqState::forking:
      case SeqState::padding:
      case SeqState::swapped:
        remove_running(id);
        std::erase(swapped_, id);
        finish(*s, FinishReason::cancelled);
        break;
      case SeqState::swapping_out:
      case SeqState::swapping_in: break;
    }
  }
  // static_padded: the batch ends when only padding rows are left.
  if (num_padding_ > 0 && num_padding_ == int32_t(running_.size()) && swapped_.empty()) drop_padding();

  // Swapped sequences come back first, oldest first, while blocks allow.
  int32_t free = free_estimate();
  // Sessions let go of the kept blocks that the next waiting request needs
  // now: the releases go out in this iteration's batch, before anything is
  // allocated, so it need not fail once first.
  if (!sessions_.empty() && swapped_.empty() && !waiting_.empty()) {
    if (const WaitingEntry* w = waiting_.front(now); w != nullptr) {
      const Sequence& next = seqs_.at(w->id);
      const int32_t need = blocks_for(int32_t(next.tokens.size()) + 1) * next.samples;
      if (need > free) free += sessions_.release_oldest(need - free, pending_frees_);
    }
  }
  // Under the priority policy a swapped sequence less urgent than the most
  // urgent waiting request stays out: that request goes first.
  const std::optional<int64_t> head_rank = waiting_head_rank(now);
  for (seq_id id : swapped_) {
    Sequence* s = find(id);
    if (s->state() != SeqState::swapped) continue;
    if (head_rank && rank(*s) > *head_rank) continue;
    if (int32_t(running_.size() + pending_swap_in_.size()) >= config_.max_num_seqs) break;
    if (s->blocks_held + 1 > free) break;
    free -= s->blocks_held + 1;
    pending_swap_in_.push_back(id);
  }

  int32_t running = running_sequences();
  // Swapped sequences come back before anything new is admitted, but for a
  // waiting request more urgent than all of them (the priority policy).
  const bool swapped_first = std::any_of(swapped_.begin(), swapped_.end(), [&](seq_id id) {
    return !head_rank || rank(seqs_.at(id)) <= *head_rank;
  });
  const bool room = running < config_.max_num_seqs && !swapped_first;
  const bool batch_open = config_.batching == BatchingMode::continuous || running_.empty();
  if (!batch_open || waiting_.empty()) return std::nullopt;
  if (!room) {
    if (head_rank && !swapped_first) blocked_head_ = waiting_.front(now)->id;  // it needs a slot
    return std::nullopt;
  }

  AdmissionQuery q;
  q.free_blocks = free + sessions_.blocks();  // sessions let go of their blocks when they are wanted
  q.total_blocks = config_.num_blocks;
  q.block_size = config_.block_size;
  q.num_running = running;
  q.max_running = config_.max_num_seqs;
  // Blocks the running sequences may still grow into (the conservative
  // policy keeps them free).
  for (seq_id id : running_) {
    const Sequence& s = seqs_.at(id);
    const int32_t final_len = s.prompt_len + s.sampling.max_tokens;
    q.reserved_blocks += std::max(0, blocks_for(final_len) - s.blocks_held);
    // Each sample still to fork: its generated tokens and a copied last block.
    q.reserved_blocks += (s.samples - 1) * (blocks_for(final_len) - s.prompt_len / config_.block_size);
  }
  const size_t limit = size_t(config_.max_num_seqs - q.num_running);
  const std::vector<WaitingEntry>& ordered = waiting_.ordered(now, limit);
  if (head_rank && !ordered.empty()) blocked_head_ = ordered.front().id;  // until it is admitted
  for (const WaitingEntry& w : ordered) {
    const Sequence& s = seqs_.at(w.id);
    q.candidates.push_back(AdmissionCandidate{s.id, int32_t(s.tokens.size()),
                                              s.sampling.max_tokens - s.generated(), s.priority,
                                              s.arrival, s.samples, s.tenant});
    if (!s.tenant.empty() && std::none_of(q.tenants.begin(), q.tenants.end(),
                                          [&](const TenantUsage& u) { return u.tenant == s.tenant; }))
      q.tenants.push_back(TenantUsage{s.tenant, 0, 0});
  }
  if (!q.tenants.empty()) {
    for (seq_id id : running_) {
      const Sequence& s = seqs_.at(id);
      for (TenantUsage& u : q.tenants)
        if (u.tenant == s.tenant) {
          u.blocks += s.blocks_held;
          u.sequences += 1;
        }
    }
  }
  return q;
}

void SchedulerCore::apply_admission(const AdmissionDecision& decision) {
  for (const auto& [id, reason] : decision.rejected) {
    Sequence* s = find(id);
    if (s == nullptr || s->state() != SeqState::waiting) continue;
    waiting_.remove(id);
    finish(*s, FinishReason::error, reason.empty() ? "refused by the admission policy" : reason);
  }
  // Whatever the policy says (a user's may say anything), no more than
  // max_num_seqs sequences run, a request counting as its samples.
  int32_t slots = config_.max_num_seqs - int32_t(pending_swap_in_.size()) - running_sequences();
  for (seq_id id : decision.admitted) {
    Sequence* s = find(id);
    // Still in the queue: a candidate named twice was planned the first time.
    if (s == nullptr || s->state() != SeqState::waiting || !waiting_.contains(id) || is_cancelled(id)) continue;
    if (s->samples > slots) break;
    // It is not held back for want of room (preemption by priority would
    // not help): it runs now, or it waits for a prefix being computed.
    if (id == blocked_head_) blocked_head_ = 0;
    // One that computes its whole prompt anyway (prompt logprobs) waits for nobody.
    if (config_.prefix_wait && !s->prompt_scoring.pending() && waits_for_shared_prefix(*s)) continue;
    waiting_.remove(id);
    plan(*s, 0, /*is_new=*/true, false);
    slots -= s->samples;
  }
}

bool SchedulerCore::waits_for_shared_prefix(Sequence& s) {
  if (!prefix_claims_.must_wait(s, config_.block_size, iteration_, seqs_, cancelled_)) return false;
  if (!s.prefix.waited) ++prefix_waits_;
  s.prefix.waited = true;
  return true;
}

void SchedulerCore::release_claims(Sequence& s) { prefix_claims_.release(s); }

// ---- sessions -------------------------------------------------------------------

void SchedulerCore::keep_for_session(const Sequence& s) {
  if (!s.in_batch() || s.blocks_held == 0 || s.samples != 1 || config_.session_max_blocks <= 0) return;
  release_session(s.session);  // an earlier turn's, if still kept
  const seq_id keeper = next_sample_id_++;
  // Forks go to the block manager before frees, so the blocks never drop to 0 references.
  pending_forks_.push_back(SeqFork{s.id, keeper});
  sessions_.keep(s.session, keeper, s.blocks_held, now_ + config_.session_ttl_seconds);
  if (sessions_.blocks() > config_.session_max_blocks)
    sessions_.release_oldest(sessions_.blocks() - config_.session_max_blocks, pending_frees_);
}

void SchedulerCore::release_session(const std::string& name) { sessions_.release(name, pending_frees_); }

void SchedulerCore::expire_sessions(double now) { sessions_.expire(now, pending_frees_); }

std::optional<double> SchedulerCore::next_session_expiry() const { return sessions_.next_expiry(); }

// Everything the block manager must hear before it allocates: computed
// progress, releases and swap completions. Every batch carries what has
// accumulated, so a completion that arrived in the middle of an iteration is
// applied before that sequence can be chosen as a victim.
void SchedulerCore::take_pending_updates(AllocationBatch& batch) {
  batch.computed = std::move(pending_computed_);
  pending_computed_.clear();
  pending_computed_.reserve(batch.computed.size());
  batch.progress_tokens = std::move(pending_progress_tokens_);
  pending_progress_tokens_.clear();
  batch.forks = std::move(pending_forks_);
  pending_forks_.clear();
  batch.frees = std::move(pending_frees_);
  pending_frees_.clear();
  pending_free_blocks_ = 0;
  batch.swap_out_done = std::move(pending_swap_out_done_);
  pending_swap_out_done_.clear();
  batch.swap_in_done = std::move(pending_swap_in_done_);
  pending_swap_in_done_.clear();
}

AllocationBatch SchedulerCore::build_allocation() {
  AllocationBatch batch;
  batch.requests.reserve(running_.size() + plan_.size());
  batch.tokens.reserve(running_.size() + plan_.size());
  take_pending_updates(batch);
  batch.swap_in = pending_swap_in_;

  // Token budget: running sequences first (decodes before prefill chunks,
  // in admission order), then the newly admitted ones. Under a latency
  // target the prefill share is what the measured step costs leave.
  int32_t budget = config_.max_batched_tokens;
  int32_t chunk = config_.prefill_chunk;
  if (config_.target_itl_seconds > 0) {
    int32_t decodes = 0;
    for (seq_id id : running_) {
      const Sequence& s = seqs_.at(id);
      decodes += s.in_batch() && s.length() - s.scheduled == 1 ? 1 : 0;
    }
    const int32_t allowance = cost_.prefill_allowance(decodes, config_.target_itl_seconds, config_.block_size);
    budget = std::min<int64_t>(budget, int64_t(decodes) + allowance);
    chunk = std::min(chunk, allowance);
  }
  // The admitted ones go after the running ones: copied out (plan_ keeps its capacity).
  scratch_admitted_.assign(plan_.begin(), plan_.end());
  plan_.clear();
  auto schedule = [&](Sequence& s, bool is_new) {
    // Its samples fork when the outstanding step's result arrives: it waits
    // for them, so that they fork from exactly its prompt's blocks.
    if (s.state() == SeqState::forking) return false;
    // Its last token is on its way (an outstanding step samples it): nothing to run.
    if (s.unconfirmed > 0 && ((s.state() != SeqState::padding && s.generated() + s.unconfirmed >= s.sampling.max_tokens) ||
                              s.length() >= config_.context_length))
      return false;
    const int32_t remaining = s.length() - s.scheduled;
    int32_t n = std::min({remaining, chunk, budget});
    if (n <= 0) return false;
    const bool decoding = !is_new && remaining == 1;
    const int32_t drafts = speculate_ && decoding && s.draft_length.may_draft()
                               ? propose_drafts(s, std::min(chunk, budget) - 1)
                               : 0;
    n += drafts;
    budget -= n;
    const bool needs_slots = is_new || s.slots < s.scheduled + n;
    plan(s, n, is_new, /*granted=*/!needs_slots);
    plan_.back().drafts = drafts;
    if (needs_slots) request_slots(batch, s, is_new, s.scheduled + n);
    return true;
  };
  if (config_.speculative.drafts()) {
    int32_t decodes = 0;
    for (seq_id id : running_) {
      const Sequence& s = seqs_.at(id);
      decodes += s.in_batch() && s.length() - s.scheduled == 1 ? 1 : 0;
    }
    speculate_ = decodes <= config_.speculative.disable_batch;
  }
  // Decodes first, then the prompts' chunks, each in admission order.
  scratch_seqs_.clear();
  for (seq_id id : running_) {
    Sequence& s = seqs_.at(id);
    if (!s.in_batch()) continue;
    if (s.length() - s.scheduled == 1)
      schedule(s, false);
    else
      scratch_seqs_.push_back(&s);
  }
  for (Sequence* s : scratch_seqs_) schedule(*s, false);
  for (const Planned& p : scratch_admitted_) {
    Sequence& s = seqs_.at(p.id);
    if (!schedule(s, true)) waiting_.push(WaitingEntry{s.id, s.priority, s.arrival, s.arrival_time});
  }
  return batch;
}

void SchedulerCore::plan(Sequence& s, int32_t max_new, bool is_new, bool granted) {
  s.plan_slot = int32_t(plan_.size());
  plan_.push_back(Planned{s.id, max_new, is_new, granted, false});
}

SchedulerCore::Planned* SchedulerCore::planned_for(const Sequence& s) {
  if (s.plan_slot < 0 || s.plan_slot >= int32_t(plan_.size())) return nullptr;
  Planned& p = plan_[size_t(s.plan_slot)];
  return p.id == s.id && !p.dropped ? &p : nullptr;
}

int32_t SchedulerCore::reserve_end(const Sequence& s, int32_t end) const {
  // Prompt chunks ask for what they compute. A parent whose samples fork
  // later shares its blocks with them: its slots must be its tokens exactly
  // (the block manager forks its token state).
  if (s.length() - s.scheduled != 1 || s.samples != 1) return end;
  const int32_t block_end = (end + config_.block_size - 1) / config_.block_size * config_.block_size;
  const int32_t last = std::min(config_.context_length, s.prompt_len + s.sampling.max_tokens);
  return std::max(end, std::min(block_end, last));
}

void SchedulerCore::request_slots(AllocationBatch& batch, const Sequence& s, bool is_new, int32_t end) {
  const auto begin = int32_t(batch.tokens.size());
  if (!is_new) end = reserve_end(s, end);
  if (is_new) {
    batch.tokens.insert(batch.tokens.end(), s.tokens.begin(), s.tokens.end());
  } else {  // tokens not sampled yet are placeholders until the block fills (SeqProgress)
    const int32_t known = std::min(end, int32_t(s.tokens.size()));
    if (s.slots < known) batch.tokens.insert(batch.tokens.end(), s.tokens.begin() + s.slots, s.tokens.begin() + known);
    batch.tokens.resize(batch.tokens.size() + size_t(end - std::max(s.slots, known)), -1);
  }
  batch.requests.push_back(
      BlockRequest{s.id, is_new, is_new && s.prompt_scoring.pending(), begin, int32_t(batch.tokens.size())});
  if (Planned* p = planned_for(s)) p->slots_end = end;
}

void SchedulerCore::apply_grant(Sequence& s, const BlockGrant& g, const AllocationResult& result) {
  s.block_table.resize(size_t(g.table_begin));
  s.block_table.insert(s.block_table.end(), result.blocks.begin() + g.blocks_begin,
                       result.blocks.begin() + g.blocks_end);
  s.blocks_held = int32_t(s.block_table.size());
}

// Only with no step outstanding (preemption waits for the pipeline to
// drain), so its blocks go back at once and it can be admitted afresh.
void SchedulerCore::requeue_for_recompute(Sequence& s) {
  release_blocks(s);
  release_claims(s);
  s.requeue();
  s.blocks_held = 0;
  s.block_table.clear();
  s.num_computed = 0;
  s.scheduled = 0;
  s.slots = 0;
  s.committed = 0;
  waiting_.push(WaitingEntry{s.id, s.priority, s.arrival, s.arrival_time});
}

// The block manager's answer, in three parts: its copies and swaps, the
// grants of this iteration's sequences, and what to do about those left short.
std::optional<PreemptionQuery> SchedulerCore::apply_allocation(const AllocationResult& result) {
  free_blocks_ = result.free_blocks;
  free_host_blocks_ = result.free_host_blocks;
  apply_copies_and_swaps(result);
  return settle_shortfall(apply_grants(result));
}

void SchedulerCore::apply_copies_and_swaps(const AllocationResult& result) {
  copies_.insert(copies_.end(), result.copies.begin(), result.copies.end());
  for (const SwapOrder& order : result.swaps) {
    swap_orders_.push_back(order);
    std::erase(swap_out_requested_, order.seq);
  }
  // A swap-out the block manager refused (host space taken meanwhile): the
  // victim is recomputed instead.
  for (seq_id id : swap_out_requested_) {
    Sequence* s = find(id);
    if (s == nullptr || s->state() != SeqState::swapping_out) continue;
    --preemptions_swap_;
    ++preemptions_recompute_;
    std::erase(swapped_, id);
    requeue_for_recompute(*s);
  }
  swap_out_requested_.clear();
  for (const BlockGrant& g : result.swap_in_grants) {
    Sequence* s = find(g.seq);
    if (s == nullptr || !g.ok) continue;
    s->start_swap_in();
    apply_grant(*s, g, result);
    std::erase(swapped_, g.seq);
  }
}

void SchedulerCore::admit_granted(Sequence& s, const BlockGrant& g) {
  s.slots = int32_t(s.tokens.size());
  // The last token is always computed, so that its logits exist.
  const int32_t cap = (int32_t(s.tokens.size()) - 1) / config_.block_size * config_.block_size;
  s.num_computed = std::min(g.cached_tokens, cap);
  s.scheduled = s.committed = s.num_computed;
  if (!s.cached_prompt_tokens) {  // its first admission
    s.cached_prompt_tokens = s.num_computed;
    queue_times_.push_back(now_ - s.arrival_time);
  }
  s.admit();
  running_.push_back(s.id);
  if (!s.session.empty()) release_session(s.session);  // it holds the blocks it reuses now
}

SchedulerCore::Shortfall SchedulerCore::apply_grants(const AllocationResult& result) {
  Shortfall short_of;
  for (const BlockGrant& g : result.grants) {
    Sequence* s = find(g.seq);
    Planned* planned = s != nullptr ? planned_for(*s) : nullptr;
    if (planned == nullptr) continue;
    if (g.ok) {
      planned->granted = true;
      apply_grant(*s, g, result);
      if (planned->is_new) {
        admit_granted(*s, g);
      } else {
        s->slots = std::max(s->slots, planned->slots_end);
      }
      continue;
    }
    planned->dropped = true;
    if (s->state() == SeqState::padding) {
      short_of.padding = true;
      continue;
    }
    if (planned->is_new) {  // not admitted after all: back to the queue
      waiting_.push(WaitingEntry{s->id, s->priority, s->arrival, s->arrival_time});
      if (config_.scheduling_policy == SchedulingPolicy::priority && blocked_head_ == 0 &&
          waiting_.front(now_)->id == s->id)
        blocked_head_ = s->id;
      short_of.new_blocks += std::max(g.shortfall, 1);
      continue;
    }
    // A guard: submit() caps max_tokens at what the cache holds, so a
    // sequence's slots never reach past it.
    if (blocks_for(int32_t(s->tokens.size()) + 1) > config_.num_blocks) {
      remove_running(s->id);
      finish(*s, FinishReason::length, "the sequence outgrew the whole KV cache");
      continue;
    }
    short_of.running_blocks += g.shortfall;
    failed_.push_back(Short{g.seq, planned->max_new});
  }
  return short_of;
}

std::optional<PreemptionQuery> SchedulerCore::settle_shortfall(Shortfall short_of) {
  int32_t shortfall = short_of.running_blocks;
  // Blocks already on their way to host memory will be free soon: sequences
  // short of blocks wait for them rather than preempting more.
  for (seq_id id : swapped_) {
    const Sequence& s = seqs_.at(id);
    if (s.state() == SeqState::swapping_out) shortfall -= s.blocks_held;
  }
  const bool running_short = !failed_.empty() && shortfall > 0;
  // Padding rows give their blocks up before anybody is preempted; those
  // short of blocks try again next iteration.
  if (num_padding_ > 0 && (short_of.padding || running_short)) {
    drop_padding();
    failed_.clear();
    return std::nullopt;
  }
  // Sessions let go of their kept blocks before anybody is preempted or
  // turned away; those short of blocks try again next iteration.
  if (!sessions_.empty() && (short_of.new_blocks > 0 || running_short)) {
    sessions_.release_oldest(std::max(shortfall, 0) + short_of.new_blocks, pending_frees_);
    failed_.clear();
    return std::nullopt;
  }
  if (!running_short) {
    failed_.clear();
    return priority_preemption();
  }
  if (!flights_.empty()) {  // victims may only be chosen among sequences no step touches
    drain_requested_ = true;
    failed_.clear();
    return std::nullopt;
  }
  return preemption_query(shortfall);
}

PreemptionQuery SchedulerCore::preemption_query(int32_t shortfall) const {
  PreemptionQuery q;
  q.shortfall = shortfall;
  q.free_host_blocks = free_host_blocks_;
  for (seq_id id : running_) {
    const Sequence& s = seqs_.at(id);
    if (s.state() != SeqState::running) continue;
    q.running.push_back(candidate(s));
  }
  return q;
}

PreemptionCandidate SchedulerCore::candidate(const Sequence& s) const {
  return PreemptionCandidate{s.id, rank32(s), s.arrival, s.blocks_held, s.num_computed, s.blocks_held};
}

int32_t SchedulerCore::running_sequences() const {
  if (multi_sample_seqs_ == 0) return int32_t(running_.size());
  int32_t n = 0;
  for (seq_id id : running_) n += seqs_.at(id).samples;  // one not forked yet will be `samples`
  return n;
}

// A block this iteration's allocation gave s is still to be filled by a
// copy-on-write copy that runs with the next step: a swap-out now would save
// the block before the copy. Such a victim is recomputed instead.
bool SchedulerCore::awaits_copy(const Sequence& s) const {
  return std::any_of(copies_.begin(), copies_.end(), [&](const std::pair<int32_t, int32_t>& c) {
    return std::find(s.block_table.begin(), s.block_table.end(), c.second) != s.block_table.end();
  });
}

bool SchedulerCore::stalls(const PreemptionDecision& decision) const {
  if (failed_.empty()) return false;  // a priority round: declining is allowed
  for (const Victim& v : decision.victims) {
    auto it = seqs_.find(v.seq);
    if (it != seqs_.end() && it->second.state() == SeqState::running) return false;
  }
  return std::none_of(plan_.begin(), plan_.end(), [](const Planned& p) { return p.granted && !p.dropped; });
}

AllocationBatch SchedulerCore::apply_preemption(const PreemptionDecision& decision) {
  AllocationBatch retry;
  int32_t preempted = 0;
  for (const Victim& v : decision.victims) {
    Sequence* s = find(v.seq);
    if (s == nullptr || s->state() != SeqState::running) continue;
    ++preempted;
    if (Planned* p = planned_for(*s)) p->dropped = true;
    std::erase_if(failed_, [&](const Short& f) { return f.id == v.seq; });
    remove_running(v.seq);
    if (v.mode == PreemptionMode::swap && !awaits_copy(*s)) {
      ++preemptions_swap_;
      s->start_swap_out();
      swapped_.push_back(s->id);
      retry.swap_out.push_back(s->id);
      swap_out_requested_.push_back(s->id);
    } else {
      ++preemptions_recompute_;
      requeue_for_recompute(*s);
    }
  }
  take_pending_updates(retry);  // the recompute victims' blocks go back first
  // The sequences that were short try once more, within the share of the
  // iteration's token budget they had; if the victims did not free enough
  // (or are still being copied out), they sit this iteration out. With no
  // victim at all nothing was freed: they sit it out now.
  if (preempted == 0) failed_.clear();
  for (const Short& f : failed_) {
    Sequence& s = seqs_.at(f.id);
    const int32_t remaining = s.length() - s.scheduled;
    const int32_t n = std::min(remaining, f.budget);  // no drafts this time
    // A verify step's rejected drafts may have left it the slots it needs now.
    const bool needs_slots = s.slots < s.scheduled + n;
    plan(s, n, false, /*granted=*/!needs_slots);
    if (needs_slots) request_slots(retry, s, false, s.scheduled + n);
  }
  failed_.clear();
  return retry;
}

// ---- swap ---------------------------------------------------------------------

std::vector<SwapOrder> SchedulerCore::take_swap_orders() {
  std::vector<SwapOrder> out = std::move(swap_orders_);
  swap_orders_.clear();
  return out;
}

void SchedulerCore::on_swap_done(const SwapDone& done) {
  Sequence* s = find(done.seq);
  if (s == nullptr) return;
  if (is_cancelled(s->id)) {  // free() releases device and host blocks alike
    std::erase(swapped_, s->id);
    finish(*s, FinishReason::cancelled);
    return;
  }
  if (done.direction == SwapDirection::out) {
    pending_swap_out_done_.push_back(s->id);
    s->swap_out_done();
  } else {
    pending_swap_in_done_.push_back(s->id);
    restored_.push_back(s->id);
    s->swap_in_done();
    running_.push_back(s->id);
  }
}

std::vector<TokenEvent> SchedulerCore::take_events() {
  std::vector<TokenEvent> out = std::move(events_);
  events_.clear();
  return out;
}

void SchedulerCore::take_events(std::vector<TokenEvent>& out) {
  out.clear();
  out.swap(events_);
}

std::vector<FinishedSequence> SchedulerCore::take_finished() {
  std::vector<FinishedSequence> out = std::move(finished_);
  finished_.clear();
  return out;
}

std::vector<double> SchedulerCore::take_queue_times() {
  std::vector<double> out = std::move(queue_times_);
  queue_times_.clear();
  return out;
}

// ---- introspection ------------------------------------------------------------

size_t SchedulerCore::num_waiting() const { return waiting_.size(); }
size_t SchedulerCore::num_running() const { return running_.size(); }
size_t SchedulerCore::num_swapped() const { return swapped_.size(); }
bool SchedulerCore::idle() const {
  return seqs_.empty() && flights_.empty() && deferred_frees_.empty() && pending_frees_.empty() &&
         pending_computed_.empty() && pending_forks_.empty() &&
         pending_swap_out_done_.empty() && pending_swap_in_done_.empty();
  // Samplers to retire travel with the next step, whenever one comes.
}

bool SchedulerCore::has_runnable_work() const {
  return !running_.empty() || !waiting_.empty() || !cancelled_.empty() ||
         !pending_swap_out_done_.empty() || !pending_swap_in_done_.empty() ||
         std::any_of(swapped_.begin(), swapped_.end(),
                     [this](seq_id id) { return seqs_.at(id).state() == SeqState::swapped; });
}

uint64_t SchedulerCore::preemptions(PreemptionMode mode) const {
  return mode == PreemptionMode::swap ? preemptions_swap_ : preemptions_recompute_;
}

}  // namespace conveyor
