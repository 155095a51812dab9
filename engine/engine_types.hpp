// Plain data exchanged between the engine's actors (see actors/messages.hpp
// for who sends what). No CAF code here: the scheduler core, the policies and
// the tests use these types directly.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/boxed.hpp"
#include "model/batch.hpp"
#include "model/sampling/sampler.hpp"

namespace conveyor {

using request_id = uint64_t;
using seq_id = uint64_t;

enum class FinishReason : uint8_t {
  none,       // still running
  stop,       // an end or stop token
  length,     // max_tokens or the context length
  cancelled,  // aborted by its client
  error,      // the engine could not run it (see the event's message)
};
const char* to_string(FinishReason r);

// What a client submits.
struct GenerateRequest {
  request_id id = 0;                // the caller's (below 2^62), or set by the engine when 0
  bool automatic_id = false;        // the engine chose `id` (from 2^62 up)
  std::vector<int32_t> prompt;      // token ids, BOS included where the model wants it
  SamplingParams sampling;
  // Under the priority scheduling policy (EngineConfig::scheduling_policy),
  // lower runs sooner, as vLLM defines the field; under fcfs it must be 0.
  int32_t priority = 0;
  // Who the request is for (the server sets the API key's name): admission
  // policies may share the KV cache among tenants (AdmissionQuery::tenants).
  // "": nobody in particular.
  std::string tenant;
  // Samples of this prompt (OpenAI's n). The prompt is computed once; at its
  // first token the sequence forks into n that share the prompt's KV blocks
  // (copy-on-write). Sample i draws with seed + i when a seed is set.
  int32_t n = 1;
  // A conversation's name (an agent's, a chat's): when a request of n = 1
  // with a session ends (stop or length), the engine keeps its KV blocks for
  // the session's next request, whose prompt continues the conversation,
  // until that request is admitted, the session expires or is released, or
  // the memory is wanted (EngineConfig::session_*). "": none.
  std::string session;
  // Tokens already generated for this request elsewhere (a router resubmits
  // a request whose node died, router/router_actor.hpp): the engine computes prompt
  // and these, its sampler replays them (penalty counts, one generator draw
  // each, as after a restart), and generation continues after them; they
  // count toward max_tokens and completion_tokens but are not sent again.
  // Only with n = 1.
  std::vector<int32_t> resume;
  // vLLM's prompt_logprobs: -1, none; K in [0, 20], the logprob and rank of
  // every prompt token after the first under the model's raw distribution
  // at the position before it (teacher forcing), with the K most likely
  // alternatives there. The prompt is computed in full for it, whatever the
  // prefix cache holds (a cached block's KV is read, never recomputed, so
  // its positions' logits would not exist); its blocks still enter the cache.
  // Delivered once, on each sample's first event (TokenEvent::prompt_logprobs).
  int32_t prompt_logprobs = -1;
};

// Request ids from 2^63 up are the engine's own (the sequences of samples
// 1..n-1); from 2^62 up to there, the ids Engine::submit gives requests that
// came without one. A client's id must be below 2^62, so the two never collide.
inline constexpr uint64_t kFirstSampleSeqId = uint64_t(1) << 63;
inline constexpr uint64_t kFirstAutomaticRequestId = uint64_t(1) << 62;
// The most samples one request may ask for (the engine's max_num_seqs may cap it lower).
inline constexpr int32_t kMaxSamples = 1024;

// A prompt token scored at the position before it (GenerateRequest::prompt_logprobs).
struct PromptLogprob {
  int32_t token = 0;                // the prompt's token
  float logprob = 0.0f;             // its log-probability under the raw model distribution
  int32_t rank = 1;                 // 1 + the tokens strictly more likely (vLLM's rank)
  std::vector<TokenLogprob> top;    // the K most likely, most likely first (ties: lower id)
};

// What few token events carry besides their token: a sample's usage on its
// final event, an error's message, the alternatives when logprobs were asked
// for, and the prompt's logprobs on a sample's first event.
struct TokenEventDetail {
  std::vector<TokenLogprob> top;    // alternatives when logprobs were asked for
  int32_t prompt_tokens = 0;        // on the final event: usage
  int32_t cached_prompt_tokens = 0; // on the final event: prompt tokens found in the prefix cache
  int32_t completion_tokens = 0;    // on the final event
  // On the final event: 1 when an end-of-sequence (or stop_token_ids) token
  // ended the sample; counted in completion_tokens, carried by no event.
  int32_t stop_tokens = 0;
  std::string message;              // on an error event
  // On a sample's first event (its first token, or its final event when it
  // ends before one), when the request asked for prompt_logprobs: prompt
  // tokens 1 .. prompt_len-1, in order.
  std::vector<PromptLogprob> prompt_logprobs;
};

// One event per produced token, and a last one with finish != none. Most
// are a token and nothing else, and an iteration hands hundreds of them from
// the scheduler's thread to the stream actors': the rest is out of line (40
// bytes an event instead of 128).
struct TokenEvent {
  request_id id = 0;
  int32_t index = 0;                // which of the request's n samples
  int32_t token = -1;               // -1 on a final event that carries no token
  float logprob = 0.0f;
  FinishReason finish = FinishReason::none;
  Errc error_code = Errc::invalid_argument;  // on an error event
  bool request_done = false;        // the request's last event (of all its samples)
  Boxed<TokenEventDetail> detail;   // empty on most events

  // The detail, or an empty one (all zero) when the event has none.
  const TokenEventDetail& details() const {
    static const TokenEventDetail none;
    return detail ? *detail.get() : none;
  }
};

// What a sink receives: an iteration's events for the requests it serves,
// in order (one message per sink per iteration, whatever the number of requests).
struct TokenBatch {
  std::vector<TokenEvent> events;
};

// ---- swap ----------------------------------------------------------------

enum class SwapDirection : uint8_t { out, in };

struct SwapOrder {
  seq_id seq = 0;
  SwapDirection direction = SwapDirection::out;
  std::vector<std::pair<int32_t, int32_t>> blocks;  // (from, to): device->host or host->device
};

struct SwapDone {
  seq_id seq = 0;
  SwapDirection direction = SwapDirection::out;
  double seconds = 0.0;             // how long the copy took (feeds the cost policy)
};

// ---- block manager -------------------------------------------------------

// The blocks one sequence needs this iteration. Its tokens are
// AllocationBatch::tokens[token_begin, token_end): for a new sequence (first
// allocation, or after a recompute preemption) its whole token list, matched
// against the prefix cache; otherwise the tokens being appended.
struct BlockRequest {
  seq_id seq = 0;
  bool is_new = false;
  bool uncached = false;            // is_new: match nothing in the prefix cache (prompt logprobs)
  int32_t token_begin = 0;
  int32_t token_end = 0;
};

// The answer to one BlockRequest (or swap-in). On success the sequence's block
// table becomes table[0, table_begin) followed by
// AllocationResult::blocks[blocks_begin, blocks_end): only what changed travels.
struct BlockGrant {
  seq_id seq = 0;
  bool ok = false;
  int32_t shortfall = 0;            // blocks missing when !ok
  int32_t cached_tokens = 0;        // new sequences: leading tokens whose KV is already cached
  int32_t table_begin = 0;
  int32_t blocks_begin = 0;
  int32_t blocks_end = 0;
};

// How many leading tokens of a sequence have their KV computed: the block
// manager hashes the full blocks among them into the prefix cache (never a
// block whose KV is not computed yet). Told once a block is full, not every
// token, with the tokens of the blocks filled since the last time: their
// slots may have been reserved before the tokens were sampled, and held
// placeholders until now. Positions [first, first + token_end - token_begin)
// hold AllocationBatch::progress_tokens[token_begin, token_end).
struct SeqProgress {
  seq_id seq = 0;
  int32_t computed = 0;
  int32_t first = 0;
  int32_t token_begin = 0;
  int32_t token_end = 0;
};

// A sample forked from its parent: it gets the parent's block table (the
// prompt's blocks, shared until one of them writes into a shared block).
struct SeqFork {
  seq_id parent = 0;
  seq_id child = 0;
};

// One iteration's work for the block manager, applied in field order.
struct AllocationBatch {
  std::vector<SeqProgress> computed;
  std::vector<int32_t> progress_tokens;  // the tokens the progress entries carry, back to back
  std::vector<SeqFork> forks;
  std::vector<seq_id> frees;          // release every block (device and host)
  std::vector<seq_id> swap_out_done;  // release the device blocks of swapped-out sequences
  std::vector<seq_id> swap_in_done;   // release the host blocks of swapped-in sequences
  std::vector<seq_id> swap_out;       // reserve host blocks; device blocks stay until done
  std::vector<seq_id> swap_in;        // reserve device blocks if they fit
  std::vector<BlockRequest> requests;
  std::vector<int32_t> tokens;        // the requests' tokens, back to back
};

struct AllocationResult {
  std::vector<BlockGrant> grants;   // one per request, same order
  std::vector<SwapOrder> swaps;     // one per swap_out, then one per swap_in that fit;
                                    // a swap-in's new block table is in its grant below
  std::vector<BlockGrant> swap_in_grants;
  std::vector<int32_t> blocks;      // the grants' changed table entries, back to back
  std::vector<std::pair<int32_t, int32_t>> copies;  // copy-on-write (src, dst) device blocks
  int32_t free_blocks = 0;          // after the batch (cached blocks count as free)
  int32_t free_host_blocks = 0;
};

struct BlockStats {
  int32_t total = 0, used = 0, free = 0, cached = 0;
  int32_t host_total = 0, host_used = 0;
  uint64_t prefix_queries = 0, prefix_hits = 0;  // in blocks
  uint64_t prefix_query_tokens = 0, prefix_hit_tokens = 0;
  uint64_t cow_copies = 0;          // blocks copied on write (samples of one prompt diverging)
  double usage_ratio() const { return total ? double(used) / total : 0.0; }
};

// ---- executor ------------------------------------------------------------

// Prompt positions of one span to score: the logits of the span's tokens
// row_offset .. row_offset + targets.size() - 1, each against the prompt
// token that follows it (targets), with `top` alternatives. The first
// target is prompt token `first` (its position).
struct PromptScoring {
  int32_t slot = 0;                 // the span's index in the batch
  int32_t row_offset = 0;
  int32_t first = 1;
  int32_t top = 0;
  std::vector<int32_t> targets;
};

// What a runner scored of one sequence's prompt in a step: prompt tokens
// first .. first + entries.size() - 1.
struct PromptScores {
  seq_id seq = 0;
  int32_t first = 1;
  std::vector<PromptLogprob> entries;
};

// One iteration's work for the executor.
//
// A token of -1 in the batch is a placeholder: the token this sequence
// sampled in the previous step, which the scheduler had not seen when it
// built this plan (it plans a step ahead). The executor fills it in.
struct StepPlan {
  uint64_t iteration = 0;
  ForwardBatch batch;
  std::vector<seq_id> seq_ids;      // parallel to batch's sequences; want_logits marks
                                    // the spans that end where a token is sampled
  std::vector<std::pair<int32_t, int32_t>> copies;  // block copies to run first (copy-on-write)
  // Sequences that start now: their sampler's parameters and prompt.
  std::vector<std::pair<seq_id, SamplingParams>> new_samplers;
  std::vector<std::vector<int32_t>> new_sampler_prompts;
  // The tokens each new sampler's sequence generated before (after an engine
  // restart; usually empty): the sampler replays them, so that its penalty
  // counts and its generator's position are those of an undisturbed run.
  std::vector<std::vector<int32_t>> new_sampler_history;
  std::vector<seq_id> retired;      // sequences whose samplers can go
  // Sequences a swap brought back since the last plan: their blocks hold the
  // target's keys and values only (a draft model's cache there is stale).
  std::vector<seq_id> restored;
  // (parent, child): the child samples from its parent's logits row this step
  // (its sampler is among new_samplers). Grouped by parent, in plan order.
  std::vector<std::pair<seq_id, seq_id>> forks;
  // Prompt positions to score (GenerateRequest::prompt_logprobs); usually empty.
  std::vector<PromptScoring> score;
};

struct SampledToken {
  seq_id seq = 0;
  SampleResult result;
};

struct StepResult {
  uint64_t iteration = 0;
  std::vector<SampledToken> tokens; // one per sequence with want_logits
  std::vector<PromptScores> prompt_scores;  // one per StepPlan::score entry
  double forward_seconds = 0.0;     // time inside the forward pass and sampling
  int64_t started_ns = 0;           // steady_clock when the runner started / finished
  int64_t finished_ns = 0;          // (the scheduler measures the hops around it)
};

// ---- the engine as a whole ---------------------------------------------------

// What an engine node says of itself (actors/node.hpp): a router checks that
// its nodes serve the same model and places requests by their block size.
struct NodeInfo {
  std::string name;              // --node-name, or host:port
  std::string model;             // the served model's name
  std::string architecture;
  int32_t vocab_size = 0;
  int32_t dim = 0;
  int32_t n_layers = 0;
  int32_t context_length = 0;
  uint64_t weights_fingerprint = 0;  // model/weights.hpp's; 0: unknown
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  bool draining = false;         // refuses new requests
};

struct EngineStats {
  int32_t num_waiting = 0;
  int32_t num_running = 0;
  int32_t num_swapped = 0;
  uint64_t iterations = 0;           // steps run (forward passes)
  uint64_t preemptions_recompute = 0;
  uint64_t preemptions_swap = 0;
  uint64_t prefix_waits = 0;         // requests that waited for a shared prefix another was computing
  // Speculative decoding (engine/speculation.hpp): verify steps (one per
  // sequence), drafts they verified, drafts accepted.
  uint64_t spec_drafts = 0;
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  int32_t sessions_held = 0;         // sessions whose KV blocks are kept
  int32_t session_blocks = 0;        // device blocks they hold (some may be shared)
  uint64_t prompt_tokens = 0;        // prompt tokens of the requests the scheduler accepted,
                                     // counted at submit (before admission), once per request
                                     // whatever its n; recomputed tokens are not counted
  uint64_t computed_tokens = 0;      // tokens run through the forward pass
  uint64_t generated_tokens = 0;
  double forward_seconds = 0.0;      // inside the executor
  double iteration_seconds = 0.0;    // whole iterations, step to step
  double scheduler_seconds = 0.0;    // the scheduler's own handlers (its CPU time, roughly)
  double delivery_seconds = 0.0;     // of which: sending token batches to the sinks
  double critical_seconds = 0.0;     // step result in to next step plan out, in the scheduler
  double block_manager_seconds = 0.0;  // allocation batches out to their results in
  double plan_hop_seconds = 0.0;     // step plan out to the runner starting
  double result_hop_seconds = 0.0;   // the runner finishing to the step result in
  double executor_idle_seconds = 0.0;  // the runner finishing a step to starting the next
  BlockStats blocks;
  double kv_live_token_ratio = 0.0;  // live tokens / slots of allocated blocks, averaged over iterations
};

}  // namespace conveyor
