// The engine's whole message catalogue: every atom, every message type and
// every actor interface, in one place.
//
//   client ──submit──▶ request actor ──submit──▶ scheduler
//   scheduler ──alloc──▶ block manager        (one batch per iteration)
//   scheduler ──admit──▶ admission policy     (when there is room to admit)
//   scheduler ──preempt──▶ preemption policy  (when running sequences are short of blocks)
//   scheduler ──swap──▶ swap actor            (orders overlap; replies when each lands)
//   scheduler ──step──▶ executor              (one forward pass per iteration)
//   scheduler ──TokenEvent──▶ request actor ──StreamEvent──▶ client sink
//
// The data types are plain structs in engine/engine_types.hpp and policies/;
// this header adds CAF's type IDs and inspect() for them. Atoms are at most
// 10 characters (CAF 0.17).
#pragma once

#include <caf/all.hpp>
#include <caf/type_id.hpp>

#include "engine/engine_types.hpp"
#include "engine/stream_event.hpp"
#include "policies/admission.hpp"
#include "policies/preemption.hpp"

namespace conveyor {

// ---- inspect() for the message types -----------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingParams& x) {
  return f(caf::meta::type_name("SamplingParams"), x.temperature, x.top_k, x.top_p, x.min_p,
           x.presence_penalty, x.frequency_penalty, x.repetition_penalty, x.seed, x.has_seed,
           x.logprobs, x.max_tokens, x.stop_token_ids, x.ignore_eos);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenLogprob& x) {
  return f(caf::meta::type_name("TokenLogprob"), x.token, x.logprob);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SampleResult& x) {
  return f(caf::meta::type_name("SampleResult"), x.token, x.logprob, x.top);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GenerateRequest& x) {
  return f(caf::meta::type_name("GenerateRequest"), x.id, x.automatic_id, x.prompt, x.sampling,
           x.priority, x.n, x.session, x.resume);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenEvent& x) {
  return f(caf::meta::type_name("TokenEvent"), x.id, x.index, x.token, x.logprob, x.top,
           x.finish, x.prompt_tokens, x.cached_prompt_tokens, x.completion_tokens, x.message,
           x.error_code, x.request_done);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BlockRequest& x) {
  return f(caf::meta::type_name("BlockRequest"), x.seq, x.is_new, x.token_begin, x.token_end);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BlockGrant& x) {
  return f(caf::meta::type_name("BlockGrant"), x.seq, x.ok, x.shortfall, x.cached_tokens,
           x.table_begin, x.blocks_begin, x.blocks_end);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SeqProgress& x) {
  return f(caf::meta::type_name("SeqProgress"), x.seq, x.computed);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SeqFork& x) {
  return f(caf::meta::type_name("SeqFork"), x.parent, x.child);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenFill& x) {
  return f(caf::meta::type_name("TokenFill"), x.seq, x.pos, x.token);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, AllocationBatch& x) {
  return f(caf::meta::type_name("AllocationBatch"), x.fills, x.computed, x.forks, x.frees, x.swap_out_done,
           x.swap_in_done, x.swap_out, x.swap_in, x.requests, x.tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SwapOrder& x) {
  return f(caf::meta::type_name("SwapOrder"), x.seq, x.direction, x.blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, AllocationResult& x) {
  return f(caf::meta::type_name("AllocationResult"), x.grants, x.swaps, x.swap_in_grants,
           x.blocks, x.copies, x.free_blocks, x.free_host_blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BlockStats& x) {
  return f(caf::meta::type_name("BlockStats"), x.total, x.used, x.free, x.cached, x.host_total,
           x.host_used, x.prefix_queries, x.prefix_hits, x.prefix_query_tokens,
           x.prefix_hit_tokens, x.cow_copies);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SwapDone& x) {
  return f(caf::meta::type_name("SwapDone"), x.seq, x.direction, x.seconds);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ForwardBatch& x) {
  return f(caf::meta::type_name("ForwardBatch"), x.tokens, x.seq_token_begin, x.seq_start_pos,
           x.block_tables, x.block_table_begin, x.want_logits);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepPlan& x) {
  return f(caf::meta::type_name("StepPlan"), x.iteration, x.batch, x.seq_ids, x.copies,
           x.new_samplers, x.new_sampler_prompts, x.new_sampler_history, x.retired, x.forks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SampledToken& x) {
  return f(caf::meta::type_name("SampledToken"), x.seq, x.result);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepResult& x) {
  return f(caf::meta::type_name("StepResult"), x.iteration, x.tokens, x.forward_seconds,
           x.started_ns, x.finished_ns);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, AdmissionCandidate& x) {
  return f(caf::meta::type_name("AdmissionCandidate"), x.id, x.prompt_tokens, x.max_tokens,
           x.priority, x.arrival, x.num_samples);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, AdmissionQuery& x) {
  return f(caf::meta::type_name("AdmissionQuery"), x.free_blocks, x.total_blocks, x.block_size,
           x.num_running, x.max_running, x.reserved_blocks, x.candidates);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, AdmissionDecision& x) {
  return f(caf::meta::type_name("AdmissionDecision"), x.admitted, x.footprints, x.rejected);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PreemptionCandidate& x) {
  return f(caf::meta::type_name("PreemptionCandidate"), x.id, x.priority, x.arrival,
           x.blocks_held, x.tokens_to_recompute, x.blocks_to_copy);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PreemptionQuery& x) {
  return f(caf::meta::type_name("PreemptionQuery"), x.shortfall, x.free_host_blocks, x.running);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Victim& x) {
  return f(caf::meta::type_name("Victim"), x.seq, x.mode);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PreemptionDecision& x) {
  return f(caf::meta::type_name("PreemptionDecision"), x.victims, x.blocks_released,
           x.covers_shortfall);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngineStats& x) {
  return f(caf::meta::type_name("EngineStats"), x.num_waiting, x.num_running, x.num_swapped,
           x.iterations, x.preemptions_recompute, x.preemptions_swap, x.prefix_waits, x.sessions_held, x.session_blocks, x.prompt_tokens,
           x.computed_tokens, x.generated_tokens, x.forward_seconds, x.iteration_seconds,
           x.scheduler_seconds, x.delivery_seconds, x.critical_seconds, x.block_manager_seconds, x.plan_hop_seconds,
           x.result_hop_seconds, x.executor_idle_seconds, x.blocks, x.kv_live_token_ratio);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, NodeInfo& x) {
  return f(caf::meta::type_name("NodeInfo"), x.name, x.model, x.architecture, x.vocab_size, x.dim,
           x.n_layers, x.context_length, x.block_size, x.num_blocks, x.draining);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StreamEvent& x) {
  return f(caf::meta::type_name("StreamEvent"), x.id, x.index, x.text, x.token_ids, x.logprobs, x.finish,
           x.prompt_tokens, x.cached_prompt_tokens, x.completion_tokens, x.error_code,
           x.message, x.refused);
}

}  // namespace conveyor

// ---- type IDs and atoms ---------------------------------------------------------

CAF_BEGIN_TYPE_ID_BLOCK(conveyor_engine, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::GenerateRequest))    // client -> scheduler
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::TokenEvent))         // scheduler -> request actor
  CAF_ADD_TYPE_ID(conveyor_engine, (conveyor::StreamEvent))        // request actor -> client
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
CAF_END_TYPE_ID_BLOCK(conveyor_engine)

namespace conveyor {

// ---- errors ------------------------------------------------------------------------

// Engine errors travel as caf::error of category "conveyor" whose code is the
// base/status.hpp Errc and whose context holds the message.
caf::error make_engine_error(const Error& error);
// Back to an Error; errors of other categories become Errc::io_error ("the
// engine is unavailable") with CAF's rendering as the message.
Error from_caf_error(const caf::error& error);
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
// completion callback telling it that order `ticket` is done.
using swap_actor = caf::typed_actor<caf::replies_to<swap_atom, SwapOrder>::with<SwapDone>,
                                    caf::reacts_to<landed_atom, uint64_t, double>>;

// Decides which waiting requests start; learns output lengths.
using admission_actor =
    caf::typed_actor<caf::replies_to<admit_atom, AdmissionQuery>::with<AdmissionDecision>,
                     caf::reacts_to<finished_atom, int32_t>>;

// Picks victims when running sequences are short of blocks; learns costs
// (seconds per recomputed token, seconds per copied block).
using preemption_actor =
    caf::typed_actor<caf::replies_to<preempt_atom, PreemptionQuery>::with<PreemptionDecision>,
                     caf::reacts_to<costs_atom, double, double>>;

// Receives a request's token events from the scheduler.
using token_sink_actor = caf::typed_actor<caf::reacts_to<TokenEvent>>;

// One per request: turns token events into text (incremental detokenizer,
// stop strings) for its client; a cancel from the client goes on to the
// scheduler after the request's own submit, so it can never overtake it.
using request_actor = token_sink_actor::extend<caf::reacts_to<cancel_atom>>;

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
