// The scheduler's logic without actors: queues, per-sequence token state and
// the phases of one iteration. The scheduler actor (actors/scheduler_actor.hpp)
// moves the values each phase returns to the block manager, policy, swap and
// executor actors and feeds their answers back; tests drive the same phases
// directly with plain objects.
//
// One iteration:
//   begin_iteration()        retire cancelled work; returns an admission query if
//                            there is room to admit (ask the admission policy)
//   apply_admission(...)     move admitted requests into this iteration
//   build_allocation()       the blocks every scheduled sequence needs now
//   apply_allocation(...)    returns a preemption query when running sequences
//                            are short of blocks (ask the preemption policy),
//   apply_preemption(...)    then retry with the returned batch
//   build_step()             the executor's step plan (empty: nothing to run)
//   apply_step(...)          append sampled tokens, finish sequences, emit events
//
// Planning ahead (config.overlap): the next step may be built while the
// previous one runs, so that the executor finds it queued and runs back to
// back. Such a plan cannot know the tokens the running step samples: a
// sequence that decodes in both steps gets a placeholder (-1) that the
// executor fills with its own last sample, and its slot is reserved before
// the token is known.
//
// Slots: a decoding sequence asks the block manager for slots up to the end
// of the block its next token goes in (reserve_end), so that it asks once a
// block, not once a token; and the block manager hears of its computed
// tokens once they fill a block, with that block's tokens (SeqProgress),
// which it needs only then, to hash the block into the prefix cache. Slots
// whose tokens were not known when they were reserved hold placeholders
// until then.
//
// A sequence that the running step ends (a stop token) runs one
// wasted decode in the planned step. At most one step is outstanding while a
// plan is built (can_build()); blocks of a finished sequence are released
// only once no outstanding step uses them; and a sequence short of blocks
// while a step is outstanding sits out, and the next plan waits for the
// pipeline to drain, so preemption (and every swap-out) only ever concerns
// sequences that no running step touches.
//
// A request with n > 1 samples is one sequence until its prompt is computed;
// the step that samples its first token samples n (one per sample, from the
// same logits row), and the scheduler forks n - 1 sequences that share the
// prompt's blocks (the block manager copies a shared, partly filled block on
// its first write). Until that step's result is in, the parent sits out, so
// the samples fork from exactly the prompt's blocks. From then on each sample
// is a sequence of its own that can be preempted, swapped and finished alone;
// the request ends when all have.
//
// Thread-safety: none; the scheduler actor is its only user.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.hpp"
#include "engine/engine_types.hpp"
#include "engine/prefix_claims.hpp"
#include "engine/sequence.hpp"
#include "engine/session_store.hpp"
#include "engine/speculation.hpp"
#include "engine/suffix_store.hpp"
#include "engine/step_cost.hpp"
#include "base/status.hpp"
#include "policies/admission.hpp"
#include "policies/preemption.hpp"
#include "policies/waiting_queue.hpp"

namespace conveyor {

// What the scheduler is told. The engine's settings come from EngineConfig
// (Engine::create copies them), with its defaults (engine_defaults); the
// rest from the KV pool and the model.
struct SchedulerConfig {
  int32_t block_size = engine_defaults::block_size;
  int32_t num_blocks = 0;           // device KV blocks
  int32_t num_host_blocks = 0;      // swap space
  int32_t max_num_seqs = engine_defaults::max_num_seqs;
  int32_t max_batched_tokens = engine_defaults::max_batched_tokens;
  int32_t prefill_chunk = engine_defaults::prefill_chunk;
  // A latency target (EngineConfig::target_itl_ms), seconds; 0: none. Each
  // iteration's token budget and prefill chunks then come from the measured
  // cost of the steps (StepCostModel), capped by the two above.
  double target_itl_seconds = 0.0;
  int32_t max_waiting = engine_defaults::max_waiting;  // past it, submit fails
  int32_t context_length = 0;       // the model's
  int32_t vocab_size = 0;           // the model's
  std::vector<int32_t> eos_ids;     // the model's end tokens
  BatchingMode batching = BatchingMode::continuous;
  SchedulingPolicy scheduling_policy = SchedulingPolicy::fcfs;
  double aging_interval_seconds = engine_defaults::aging_interval_seconds;
  bool overlap = engine_defaults::overlap;  // build the next step while one runs
  // After an engine fault (recover_from_fault): true, the sequences a lost
  // step touched are recomputed from their tokens so far, each at most
  // max_fault_retries times; false, they end with an error at once.
  bool recompute_after_fault = true;
  int32_t max_fault_retries = engine_defaults::max_fault_retries;
  // A request whose leading full blocks another running sequence is still
  // computing waits for them (then finds them in the prefix cache) instead
  // of computing them too. Only useful with the block manager's prefix cache.
  bool prefix_wait = engine_defaults::prefix_wait;
  // Sessions (GenerateRequest::session): how long a session's blocks are
  // kept after its request ends, and the most device blocks all sessions
  // may keep (past it, the oldest session lets go).
  double session_ttl_seconds = engine_defaults::session_ttl_seconds;
  int32_t session_max_blocks = 0;
  // The runner scores prompt positions (StepRunner::scores_prompts); without
  // it, requests that ask for prompt_logprobs are refused at submit.
  bool prompt_logprobs = false;
  // Speculative decoding (engine/speculation.hpp). With overlap, plans are
  // built ahead only while no sequence is likely to draft (can_build()).
  SpeculativeConfig speculative;
};

struct FinishedSequence {
  seq_id seq = 0;
  int32_t generated = 0;
  FinishReason reason = FinishReason::none;
};

class SchedulerCore {
 public:
  explicit SchedulerCore(SchedulerConfig config);

  // ---- requests ----------------------------------------------------------
  // Queues a request. Errors: invalid prompt or parameters, or the waiting
  // queue is full (Errc::unsupported is not used; see engine_errc below).
  Status submit(GenerateRequest request, double now);
  // Marks a request (all its samples) cancelled; it leaves at the next
  // iteration boundary.
  void cancel(request_id id);
  // Cancels sample `index` of a request only. Before the request's first
  // token its samples are one sequence, and this cancels nothing.
  void cancel_sample(request_id id, int32_t index);

  // ---- one iteration -----------------------------------------------------
  std::optional<AdmissionQuery> begin_iteration(double now);
  void apply_admission(const AdmissionDecision& decision);
  AllocationBatch build_allocation();
  std::optional<PreemptionQuery> apply_allocation(const AllocationResult& result);
  AllocationBatch apply_preemption(const PreemptionDecision& decision);
  // Whether `decision` preempts no running sequence while nothing else of
  // this iteration got its blocks: taken as it is, no sequence would ever
  // run again (a policy's failure; the scheduler actor asks its fallback).
  bool stalls(const PreemptionDecision& decision) const;
  StepPlan build_step();
  // Results come in the order the plans were built.
  void apply_step(const StepResult& result, double now);
  // Whether a new iteration may be built now: nothing outstanding, or (with
  // overlap) one step outstanding and no drain requested.
  bool can_build() const;
  bool wants_drafts() const;  // some decoding sequence may draft this iteration
  size_t outstanding_steps() const { return flights_.size(); }

  // ---- sessions ----------------------------------------------------------
  // Lets go of a session's kept blocks (no-op for an unknown name).
  void release_session(const std::string& name);
  // Lets go of the sessions whose time is up; when the next one expires.
  void expire_sessions(double now);
  std::optional<double> next_session_expiry() const;
  int32_t sessions_held() const { return sessions_.size(); }
  int32_t session_blocks() const { return sessions_.blocks(); }

  // ---- faults ------------------------------------------------------------
  // The engine's workers failed (`why` says how) and were replaced: the block
  // manager and the runner start afresh, every outstanding step, copy and
  // allocation is lost. Sequences that held KV (running, swapped, or on
  // their way) go back to the waiting queue to be recomputed from their
  // tokens so far, or end with Errc::internal when recompute is off or they
  // have been through max_fault_retries restarts already. Waiting sequences
  // lost nothing and stay. Their samplers restart from their tokens
  // (StepPlan::new_sampler_history), so the output equals an undisturbed run.
  // Call only once no reply from the old workers can arrive.
  void recover_from_fault(const std::string& why);

  // ---- swap --------------------------------------------------------------
  // Swap orders produced by the last allocation result (to the swap actor).
  std::vector<SwapOrder> take_swap_orders();
  void on_swap_done(const SwapDone& done);

  // Events for clients produced since the last call.
  std::vector<TokenEvent> take_events();
  // The same into `out` (cleared first); the two buffers trade places, so a
  // caller that keeps `out` across iterations allocates nothing.
  void take_events(std::vector<TokenEvent>& out);
  // Sequences that finished since the last call (feeds the profiled admission policy).
  std::vector<FinishedSequence> take_finished();
  // Seconds each newly admitted request waited in the queue, since the last call.
  std::vector<double> take_queue_times();

  // ---- introspection -----------------------------------------------------
  size_t num_waiting() const;
  size_t num_running() const;
  size_t num_swapped() const;  // swapping out, swapped, or swapping in
  bool idle() const;           // nothing queued, running, swapping or left to tell the block manager
  bool has_runnable_work() const;
  uint64_t iteration() const { return iteration_; }
  uint64_t preemptions(PreemptionMode mode) const;
  // Speculative decoding: verify steps of one sequence, the drafts they
  // verified, and those accepted (vLLM's num_drafts, num_draft_tokens and
  // num_accepted_tokens).
  struct SpeculationCounts {
    uint64_t drafts = 0, draft_tokens = 0, accepted_tokens = 0;
  };
  const SpeculationCounts& speculation() const { return speculation_; }
  // Requests that waited at least once for a shared prefix being computed.
  uint64_t prefix_waits() const { return prefix_waits_; }
  // Share of the slots of allocated blocks that held live tokens, averaged
  // over the iterations run so far (the KV utilization benchmark's figure).
  double kv_live_token_ratio() const {
    return kv_slots_sum_ > 0 ? double(kv_live_sum_) / double(kv_slots_sum_) : 0.0;
  }

 private:
  // A sequence's part of the iteration being built.
  struct Planned {
    seq_id id = 0;
    int32_t max_new = 0;   // tokens it may compute (budget)
    bool is_new = false;
    bool granted = false;
    bool dropped = false;  // left this iteration (not admitted after all, short of blocks, victim)
    bool samples = false;  // the step samples its next token
    int32_t drafts = 0;    // of max_new, drafts the step verifies (Sequence::drafts)
    int32_t slots_end = 0; // the slots asked of the block manager reach this position
  };

  // The sequences of a request with n > 1, by sample index (forked ones
  // appear at the fork), and how many of its samples have not ended.
  struct Group {
    std::vector<seq_id> seqs;
    int32_t open = 0;
  };
  // A fork planned into the step being run: created when its result arrives.
  struct Fork {
    seq_id parent = 0;
    seq_id child = 0;
    int32_t index = 0;
  };

  Sequence* find(seq_id id);
  // A finished sequence goes: from seqs_, and from the cancelled list.
  void erase_sequence(seq_id id);
  void cancel_sequence(seq_id id);
  bool is_cancelled(seq_id id) const;
  // Counts one more ended sample of `request`; true when it was the last.
  bool close_sample(request_id request);
  void plan_forks(Sequence& parent, StepPlan& plan);
  void apply_forks(const std::vector<Fork>& forks);
  // Gives the sequence's blocks back: now, or once the outstanding step that
  // uses it has completed.
  void release_blocks(const Sequence& s);
  void plan(Sequence& s, int32_t max_new, bool is_new, bool granted);
  // Speculative decoding: proposes s's drafts for this iteration (at most
  // `room`, in Sequence::drafts) and returns how many.
  int32_t propose_drafts(Sequence& s, int32_t room);
  bool proposes(const Sequence& s) const;  // some proposer may draft for s
  bool likely_proposes(const Sequence& s) const;  // wants_drafts(): s's proposer is likely to draft now
  bool jumps_forward(const Sequence& s) const;  // jump-forward drafts for s (under its grammar)
  // Jump-forward: s's scheduler-side grammar matcher, fed its generated
  // tokens so far; null when the grammar refused one.
  grammar::Matcher* synced_matcher(Sequence& s);
  // A verify step's outcome: it sampled `emitted` tokens for s (its drafts
  // accepted, then one more), so that many positions have their KV.
  void apply_verified(Sequence& s, const Planned& p, int32_t emitted);
  Planned* planned_for(const Sequence& s);
  // Asks the block manager for s's slots up to position `end` (exclusive),
  // or for a decoding sequence up to reserve_end(s, end).
  void request_slots(AllocationBatch& batch, const Sequence& s, bool is_new, int32_t end);
  // Where a decoding sequence's request for slots up to `end` reaches: the
  // end of the block that holds position end - 1 (never past the sequence's
  // last position), so that the block manager hears from it once a block
  // rather than once a token. The block is taken either way; the slots
  // after its tokens are placeholders until the block fills (SeqProgress).
  // Other sequences' requests stay at `end`.
  int32_t reserve_end(const Sequence& s, int32_t end) const;
  void apply_grant(Sequence& s, const BlockGrant& g, const AllocationResult& result);
  // apply_allocation's parts.
  struct Shortfall {
    int32_t running_blocks = 0;  // that running sequences lack
    int32_t new_blocks = 0;      // that requests admitted this iteration lacked (back to the queue)
    bool padding = false;        // a padding row lacked blocks
  };
  void apply_copies_and_swaps(const AllocationResult& result);
  Shortfall apply_grants(const AllocationResult& result);
  void admit_granted(Sequence& s, const BlockGrant& g);  // its first blocks: it runs
  // Padding rows, then sessions, give their blocks up; else, with no step
  // outstanding, the preemption policy is asked.
  std::optional<PreemptionQuery> settle_shortfall(Shortfall short_of);
  PreemptionQuery preemption_query(int32_t shortfall) const;
  PreemptionCandidate candidate(const Sequence& s) const;  // as the preemption policy sees it
  // Sequences the running requests are, a request that has not forked yet
  // counting as its samples.
  int32_t running_sequences() const;
  // The priority policy (scheduler_priority.cpp): a sequence's effective
  // priority now (lower runs sooner; aged since its arrival, running or
  // not), the most urgent waiting request's (nullopt under fcfs or with
  // nobody waiting), and the preemption that makes room for that request
  // when it found none.
  int64_t rank(const Sequence& s) const;
  int32_t rank32(const Sequence& s) const;  // clamped, for PreemptionCandidate::priority
  std::optional<int64_t> waiting_head_rank(double now) const;
  std::optional<PreemptionQuery> priority_preemption();
  void take_pending_updates(AllocationBatch& batch);
  void requeue_for_recompute(Sequence& s);
  bool awaits_copy(const Sequence& s) const;  // a copy-on-write into its blocks is pending
  // True when another sequence is computing one of s's leading full blocks
  // (s waits); otherwise s claims the blocks that nobody computes.
  bool waits_for_shared_prefix(Sequence& s);
  void release_claims(Sequence& s);
  // A request of a session ended: a sequence forked from it keeps its blocks.
  void keep_for_session(const Sequence& s);
  void finish(Sequence& s, FinishReason reason, std::string message = {},
              Errc code = Errc::invalid_argument);
  void append_token(Sequence& s, int32_t token);
  // Tells the block manager of s's computed tokens once they fill a block
  // (SeqProgress), with those blocks' tokens.
  void tell_progress(Sequence& s);
  // The client events that end a sequence (all its samples before a fork).
  void emit_final(Sequence& s, FinishReason reason, const std::string& message,
                  Errc code = Errc::invalid_argument);
  // Prompt logprobs: the positions of a span to score, the runner's scores
  // in, and the scores out once, with the sequence's first event.
  void plan_scoring(const Sequence& s, int32_t start, int32_t n, StepPlan& plan) const;
  void apply_scores(const std::vector<PromptScores>& scores);
  std::vector<PromptLogprob> take_prompt_scores(Sequence& s) const;
  // static_padded: the sequence ends for its client and decodes on.
  void end_into_padding(Sequence& s, FinishReason reason, int32_t stop_token);
  void retire_padding(Sequence& s);
  // Retires every padding row (the batch ended, or its blocks are needed).
  void drop_padding();
  void remove_running(seq_id id);
  int32_t blocks_for(int32_t tokens) const;
  // Free device blocks once this iteration's pending releases are applied.
  int32_t free_estimate() const;
  bool is_stop(const Sequence& s, int32_t token) const;

  SchedulerConfig config_;
  std::unordered_map<seq_id, Sequence> seqs_;
  WaitingQueue waiting_;
  std::unordered_map<request_id, Group> groups_;  // requests with n > 1
  // A step sent to the executor whose result has not been applied.
  struct Flight {
    uint64_t iteration = 0;
    std::vector<Planned> planned;
    std::vector<Fork> forks;
  };
  std::vector<Fork> step_forks_;             // in the step being built
  std::vector<Flight> flights_;              // outstanding steps, oldest first
  // An applied step's plan, emptied: the next plan_ takes its capacity (a
  // plan of hundreds of sequences grows from nothing 9 times otherwise).
  std::vector<Planned> spare_plan_;
  std::vector<Planned> scratch_admitted_;    // build_allocation's
  struct DeferredFree {
    uint64_t after = 0;  // the step that must complete first
    seq_id seq = 0;
    int32_t blocks = 0;  // device blocks it holds
  };
  std::vector<DeferredFree> deferred_frees_;
  std::vector<int32_t> scratch_tokens_;      // a span with a placeholder
  StepCostModel cost_;                       // with a latency target
  void observe_cost(const Flight& flight, double seconds);
  // The priority policy: the most urgent waiting request when this
  // iteration found no room for it (no slot, admission said no, or its
  // blocks were not granted); 0 otherwise.
  seq_id blocked_head_ = 0;
  uint64_t last_applied_ = 0;                // the last step whose result was applied
  bool drain_requested_ = false;             // the next plan waits for the outstanding step
  std::vector<SeqFork> pending_forks_;       // for the block manager's next batch
  seq_id next_sample_id_ = kFirstSampleSeqId;
  std::vector<seq_id> running_;              // admission order
  std::vector<seq_id> swapped_;              // swapped out, oldest first
  std::vector<Planned> plan_;                // this iteration's sequences
  std::vector<seq_id> pending_frees_;        // go back to the block manager next batch
  std::vector<seq_id> pending_swap_out_done_;
  std::vector<seq_id> pending_swap_in_done_;
  std::vector<seq_id> pending_swap_in_;      // asked of the block manager this batch
  std::vector<seq_id> retired_samplers_;
  std::vector<seq_id> restored_;             // swapped in since the last plan (StepPlan::restored)
  std::vector<seq_id> cancelled_;            // cancelled, not yet ended (a copy may be under way)
  struct Short {
    seq_id id;
    int32_t budget;  // the tokens the iteration's budget gave it
  };
  std::vector<Short> failed_;                // running, short of blocks this iteration
  std::vector<seq_id> swap_out_requested_;   // victims whose swap-out the block manager must confirm
  std::vector<std::pair<int32_t, int32_t>> copies_;  // copy-on-write for the next step
  std::vector<SeqProgress> pending_computed_;
  std::vector<int32_t> pending_progress_tokens_;  // what pending_computed_ carries
  std::vector<FinishedSequence> finished_;
  std::vector<double> queue_times_;
  double now_ = 0.0;                         // as of begin_iteration
  int32_t pending_free_blocks_ = 0;          // held by pending_frees_
  int32_t num_padding_ = 0;                  // static_padded rows in running_
  size_t block_table_hint_ = 0;              // block-table entries in the last step plan
  uint64_t kv_live_sum_ = 0;                 // live tokens, summed over steps
  uint64_t kv_slots_sum_ = 0;                // slots of held blocks, summed over steps
  std::vector<SwapOrder> swap_orders_;
  std::vector<TokenEvent> events_;
  PrefixClaims prefix_claims_;               // leading blocks being computed (prefix waits)
  uint64_t prefix_waits_ = 0;
  SessionStore sessions_;                    // sessions' kept blocks
  int32_t free_blocks_ = 0;                  // as of the last allocation result
  int32_t free_host_blocks_ = 0;
  uint64_t iteration_ = 0;
  uint64_t next_arrival_ = 0;
  uint64_t preemptions_recompute_ = 0;
  uint64_t preemptions_swap_ = 0;
  SpeculationCounts speculation_;
  // --speculative suffix: recent requests' tokens (the last this many).
  static constexpr int32_t kSuffixStoreTokens = 1 << 17;
  std::unique_ptr<SuffixStore> suffix_store_;
  std::vector<int32_t> scratch_drafts_;
  mutable std::vector<int32_t> probe_drafts_;  // likely_proposes()'s
  std::vector<Sequence*> scratch_seqs_;      // build_allocation's prompt chunks
  int32_t multi_sample_seqs_ = 0;            // sequences with samples > 1 (not forked yet)
  bool speculate_ = false;                   // this iteration drafts (few enough sequences decode)
};

}  // namespace conveyor
