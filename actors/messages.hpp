// The engine's whole message catalogue: every atom, every message type and
// every actor interface, in one place.
//
//   client ──open──▶ stream actor ──submit──▶ scheduler
//   scheduler ──alloc──▶ block manager        (one batch per iteration)
//   scheduler ──admit──▶ admission policy     (when there is room to admit)
//   scheduler ──preempt──▶ preemption policy  (when running sequences are short of blocks)
//   scheduler ──swap──▶ swap actor            (orders overlap; replies when each lands)
//   scheduler ──step──▶ executor              (one forward pass per iteration)
//   scheduler ──TokenBatch──▶ stream actor ──StreamEvent──▶ client callback
//                             (one batch per sink per iteration)
//
// The data types are plain structs in engine/engine_types.hpp and policies/;
// this header adds CAF's type IDs and inspect() for them. Atoms are at most
// 10 characters (CAF 0.17).
#pragma once

#include <caf/all.hpp>
#include <caf/type_id.hpp>

#include "engine/engine_types.hpp"
#include "engine/stream_event.hpp"
#include "grammar/grammar.hpp"
#include "policies/admission.hpp"
#include "policies/preemption.hpp"

namespace conveyor {

// ---- inspect() for the message types -----------------------------------------

// inspect() for a plain struct: its fields in declaration order, each named
// once. C++20 cannot list a struct's fields by itself, so the list stays
// beside each struct; but the names are a structured binding of the struct,
// so a list that leaves a field out (or names one too many) does not
// compile: a field added to a message cannot be silently dropped on the wire
// to a router or node. (The names bind by position, so the wire order is the
// declaration order whatever they say: keep them matching.)
#define CONVEYOR_INSPECT(Type, ...)                                \
  template <class Inspector>                                       \
  typename Inspector::result_type inspect(Inspector& f, Type& x) { \
    auto& [__VA_ARGS__] = x;                                       \
    return f(caf::meta::type_name(#Type), __VA_ARGS__);            \
  }

CONVEYOR_INSPECT(LogitBias, token, bias)

namespace grammar {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ByteSet& x) {
  return f(caf::meta::type_name("ByteSet"), x.bits[0], x.bits[1], x.bits[2], x.bits[3]);
}
CONVEYOR_INSPECT(Element, kind, index)
CONVEYOR_INSPECT(Rule, name, alternatives)
CONVEYOR_INSPECT(Grammar, rules, byte_sets, root, trigger_token)
}  // namespace grammar

// A grammar travels as its IR; the receiving engine compiles it against its
// own vocabulary (Engine::submit), so `compiled` arrives empty.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GrammarConstraint& x) {
  std::vector<grammar::Grammar> ir;  // none or one
  if (x.ir) ir.push_back(*x.ir);
  if constexpr (Inspector::reads_state) {
    return f(caf::meta::type_name("GrammarConstraint"), ir);
  } else {
    auto result = f(caf::meta::type_name("GrammarConstraint"), ir);
    x.compiled = nullptr;
    x.ir = ir.empty() ? nullptr : std::make_shared<const grammar::Grammar>(std::move(ir.front()));
    return result;
  }
}

CONVEYOR_INSPECT(SamplingParams, temperature, top_k, top_p, min_p, presence_penalty,
                 frequency_penalty, repetition_penalty, seed, has_seed, logprobs, max_tokens,
                 stop_token_ids, ignore_eos, logit_bias, grammar)
CONVEYOR_INSPECT(TokenLogprob, token, logprob)
CONVEYOR_INSPECT(SampleResult, token, logprob, top)
CONVEYOR_INSPECT(PromptLogprob, token, logprob, rank, top)
CONVEYOR_INSPECT(GenerateRequest, id, automatic_id, prompt, sampling, priority, tenant, n, session,
                 resume, prompt_logprobs)
CONVEYOR_INSPECT(TokenEventDetail, top, prompt_tokens, cached_prompt_tokens, completion_tokens, stop_tokens, message,
                 prompt_logprobs)
// The detail travels as a list of none or one.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenEvent& x) {
  std::vector<TokenEventDetail> detail;
  if constexpr (Inspector::reads_state) {
    if (x.detail) detail.push_back(*x.detail.get());
  }
  auto unpack = caf::meta::load_callback([&]() -> caf::error {
    if (detail.size() > 1) return caf::sec::invalid_argument;
    x.detail.reset();
    if (!detail.empty()) x.detail.get_or_make() = std::move(detail.front());
    return caf::none;
  });
  return f(caf::meta::type_name("TokenEvent"), x.id, x.index, x.token, x.logprob, x.finish, x.error_code,
           x.request_done, detail, unpack);
}
CONVEYOR_INSPECT(TokenBatch, events)
CONVEYOR_INSPECT(BlockRequest, seq, is_new, uncached, token_begin, token_end)
CONVEYOR_INSPECT(BlockGrant, seq, ok, shortfall, cached_tokens, table_begin, blocks_begin,
                 blocks_end)
CONVEYOR_INSPECT(SeqProgress, seq, computed, first, token_begin, token_end)
CONVEYOR_INSPECT(SeqFork, parent, child)
CONVEYOR_INSPECT(AllocationBatch, computed, progress_tokens, forks, frees, swap_out_done, swap_in_done,
                 swap_out, swap_in, requests, tokens)
CONVEYOR_INSPECT(SwapOrder, seq, direction, blocks)
CONVEYOR_INSPECT(AllocationResult, grants, swaps, swap_in_grants, blocks, copies, free_blocks,
                 free_host_blocks)
CONVEYOR_INSPECT(BlockStats, total, used, free, cached, host_total, host_used, prefix_queries,
                 prefix_hits, prefix_query_tokens, prefix_hit_tokens, cow_copies)
CONVEYOR_INSPECT(SwapDone, seq, direction, seconds)
CONVEYOR_INSPECT(ForwardBatch, tokens, seq_token_begin, seq_start_pos, block_tables,
                 block_table_begin, want_logits, seq_prompt_len)
CONVEYOR_INSPECT(PromptScoring, slot, row_offset, first, top, targets)
CONVEYOR_INSPECT(PromptScores, seq, first, entries)
CONVEYOR_INSPECT(StepPlan, iteration, batch, seq_ids, copies, new_samplers, new_sampler_prompts,
                 new_sampler_history, retired, restored, forks, score)
CONVEYOR_INSPECT(SampledToken, seq, result)
CONVEYOR_INSPECT(StepResult, iteration, tokens, prompt_scores, forward_seconds, started_ns, finished_ns)
CONVEYOR_INSPECT(AdmissionCandidate, id, prompt_tokens, max_tokens, priority, arrival, num_samples,
                 tenant)
CONVEYOR_INSPECT(TenantUsage, tenant, blocks, sequences)
CONVEYOR_INSPECT(AdmissionQuery, free_blocks, total_blocks, block_size, num_running, max_running,
                 reserved_blocks, candidates, tenants)
CONVEYOR_INSPECT(AdmissionDecision, admitted, footprints, rejected)
CONVEYOR_INSPECT(PreemptionCandidate, id, priority, arrival, blocks_held, tokens_to_recompute,
                 blocks_to_copy)
CONVEYOR_INSPECT(PreemptionQuery, shortfall, min_victims, free_host_blocks, running)
CONVEYOR_INSPECT(Victim, seq, mode)
CONVEYOR_INSPECT(PreemptionDecision, victims, blocks_released, covers_shortfall)
CONVEYOR_INSPECT(EngineStats, num_waiting, num_running, num_swapped, iterations,
                 preemptions_recompute, preemptions_swap, prefix_waits, spec_drafts,
                 spec_draft_tokens, spec_accepted_tokens, sessions_held,
                 session_blocks, prompt_tokens, computed_tokens, generated_tokens, forward_seconds,
                 iteration_seconds, scheduler_seconds, delivery_seconds, critical_seconds,
                 block_manager_seconds, plan_hop_seconds, result_hop_seconds,
                 executor_idle_seconds, blocks, kv_live_token_ratio)
CONVEYOR_INSPECT(NodeInfo, name, model, architecture, vocab_size, dim, n_layers, context_length,
                 weights_fingerprint, block_size, num_blocks, draining)
CONVEYOR_INSPECT(StreamEvent, id, index, text, token_ids, logprobs, finish, prompt_tokens,
                 cached_prompt_tokens, completion_tokens, error_code, message, refused, prompt_logprobs)

}  // namespace conveyor

// ---- type IDs and atoms ---------------------------------------------------------

CAF_BEGIN_TYPE_ID_BLOCK(conveyor_engine, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::GenerateRequest))    // client -> scheduler
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::TokenBatch))         // scheduler -> sink (stream actor, router)
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::StreamEvent))        // stream actor -> client
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::AllocationBatch))    // scheduler -> block manager
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::AllocationResult))   // block manager -> scheduler
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::BlockStats))         // block manager -> anyone
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::SwapOrder))          // scheduler -> swap
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::SwapDone))           // swap -> scheduler
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::StepPlan))           // scheduler -> executor
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::StepResult))         // executor -> scheduler
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::AdmissionQuery))     // scheduler -> admission
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::AdmissionDecision))  // admission -> scheduler
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::PreemptionQuery))    // scheduler -> preemption
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::PreemptionDecision)) // preemption -> scheduler
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::EngineStats))        // scheduler -> anyone
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::NodeInfo))           // node -> router

  CAF_ADD_ATOM(conveyor_engine, conveyor, submit_atom, "submit")    // enqueue a request
  CAF_ADD_ATOM(conveyor_engine, conveyor, cancel_atom, "cancel")    // cancel a request
  CAF_ADD_ATOM(conveyor_engine, conveyor, alloc_atom, "alloc")      // one allocation batch
  CAF_ADD_ATOM(conveyor_engine, conveyor, stats_atom, "stats")      // ask for statistics
  CAF_ADD_ATOM(conveyor_engine, conveyor, swap_atom, "swap")        // run a swap order
  CAF_ADD_ATOM(conveyor_engine, conveyor, landed_atom, "landed")    // a swap order's copies landed
  CAF_ADD_ATOM(conveyor_engine, conveyor, step_atom, "step")        // run one iteration
  CAF_ADD_ATOM(conveyor_engine, conveyor, admit_atom, "admit")      // admission query
  CAF_ADD_ATOM(conveyor_engine, conveyor, preempt_atom, "preempt")  // preemption query
  CAF_ADD_ATOM(conveyor_engine, conveyor, finished_atom, "finished")// a request finished (length)
  CAF_ADD_ATOM(conveyor_engine, conveyor, costs_atom, "costs")      // measured preemption costs
  CAF_ADD_ATOM(conveyor_engine, conveyor, policy_atom, "policy")    // replace a policy actor
  CAF_ADD_ATOM(conveyor_engine, conveyor, wake_atom, "wake")        // start an iteration if idle
  CAF_ADD_ATOM(conveyor_engine, conveyor, session_atom, "session")  // release a session's KV
  CAF_ADD_ATOM(conveyor_engine, conveyor, describe_atom, "describe")// a node's NodeInfo
  CAF_ADD_ATOM(conveyor_engine, conveyor, drain_atom, "drain")      // a node refuses new requests
  CAF_ADD_ATOM(conveyor_engine, conveyor, poll_atom, "poll")        // the executor checks its launched step
  CAF_ADD_ATOM(conveyor_engine, conveyor, open_atom, "open")        // a stream actor takes a request
CAF_END_TYPE_ID_BLOCK(conveyor_engine)

namespace conveyor {

// ---- errors ------------------------------------------------------------------------

// Engine errors travel as caf::error of category "conveyor" whose code is the
// base/status.hpp Errc and whose context holds the message.
caf::error make_engine_error(const Error& error);
// Back to an Error; errors of other categories become Errc::io_error ("the
// engine is unavailable") with CAF's rendering as the message.
Error from_caf_error(const caf::error& error);
// Whether `error` was made by make_engine_error.
bool is_engine_error(const caf::error& error);
// Registers the message types and the error category with a config, and
// picks CAF's "sharing" scheduler and its number of workers (see
// messages.cpp for why); a caller may override either afterwards.
void add_engine_types(caf::actor_system_config& cfg);

// ---- actor interfaces -------------------------------------------------------------

// Runs one iteration's forward pass and sampling (detached: its own thread).
// poll is its own message to itself while a pipelined runner's step runs.
using executor_actor =
    caf::typed_actor<caf::replies_to<step_atom, StepPlan>::with<StepResult>, caf::reacts_to<poll_atom>>;

// Owns the KV block metadata (engine/block_manager.hpp).
using block_manager_actor =
    caf::typed_actor<caf::replies_to<alloc_atom, AllocationBatch>::with<AllocationResult>,
                     caf::replies_to<stats_atom>::with<BlockStats>>;

// Copies blocks between device and host (detached: copies overlap compute;
// several orders may be in flight). `landed` is its own SwapEngine's
// completion callback telling it that order `ticket` is done (with the
// seconds it took) or failed (with why).
using swap_actor = caf::typed_actor<caf::replies_to<swap_atom, SwapOrder>::with<SwapDone>,
                                    caf::reacts_to<landed_atom, uint64_t, double>,
                                    caf::reacts_to<landed_atom, uint64_t, std::string>>;

// Decides which waiting requests start; learns output lengths.
using admission_actor =
    caf::typed_actor<caf::replies_to<admit_atom, AdmissionQuery>::with<AdmissionDecision>,
                     caf::reacts_to<finished_atom, int32_t>>;

// Picks victims when running sequences are short of blocks; learns costs
// (seconds per recomputed token, seconds per copied block).
using preemption_actor =
    caf::typed_actor<caf::replies_to<preempt_atom, PreemptionQuery>::with<PreemptionDecision>,
                     caf::reacts_to<costs_atom, double, double>>;

// Receives the token events of the requests it submitted, one TokenBatch per
// iteration (a sink serves any number of requests).
using token_sink_actor = caf::typed_actor<caf::reacts_to<TokenBatch>>;

// The scheduler: submit answers the request id (or an engine error), cancel
// takes effect at the next iteration boundary (with an index: that one of the
// request's n samples only), policy replaces a policy actor without dropping
// anything in flight.
using scheduler_actor = caf::typed_actor<
    caf::replies_to<submit_atom, GenerateRequest, token_sink_actor>::with<request_id>,
    caf::reacts_to<cancel_atom, request_id>,
    caf::reacts_to<cancel_atom, request_id, int32_t>,
    caf::reacts_to<policy_atom, admission_actor>,
    caf::reacts_to<policy_atom, preemption_actor>,
    caf::reacts_to<wake_atom>,
    caf::reacts_to<session_atom, std::string>,
    caf::replies_to<stats_atom>::with<EngineStats>>;

// An engine node's door for a router on another machine (actors/node.hpp),
// published on CAF's middleman: the scheduler's request messages (submit
// answers the node's own id for the request; its TokenEvents go to the sink,
// across the network: a caf::actor, as typed handles have no type ID to
// travel with), its statistics, and what the node serves.
using node_actor = caf::typed_actor<
    caf::replies_to<submit_atom, GenerateRequest, caf::actor>::with<request_id>,
    caf::reacts_to<cancel_atom, request_id>,
    caf::reacts_to<cancel_atom, request_id, int32_t>,
    caf::reacts_to<session_atom, std::string>,
    caf::replies_to<stats_atom>::with<EngineStats>,
    caf::replies_to<describe_atom>::with<NodeInfo>,
    caf::reacts_to<drain_atom>>;

}  // namespace conveyor
