// A sequence as the scheduler keeps it: one sample of a request (before its
// first token, all of them), its tokens and KV blocks, and where it is in
// its life. The scheduler core (engine/scheduler_core.hpp) owns every
// Sequence and moves it from state to state only through the transitions
// below, each of which checks the state it leaves:
//
//                      admit                 plan_fork
//   waiting ─────────────────▶ running ◀────────────────▶ forking
//     ▲  ▲                      │ │ │        forked
//     │  │      requeue         │ │ │ end_into_padding
//     │  └──────────────────────┘ │ └──────────────────▶ padding (static-padded)
//     │     (preempted for        │
//     │      recompute)           │ start_swap_out
//     │                           ▼
//     │  requeue (copy refused)  swapping_out ──swap_out_done──▶ swapped
//     └────────────────────────────┘                               │
//                       running ◀──swap_in_done── swapping_in ◀────┘ start_swap_in
//
//   restart: any state to waiting (the engine's workers failed and were
//   replaced; the sequence is recomputed from its tokens).
//
// A sequence that finishes (a stop token, its length, a cancel, an error)
// is erased, from whatever state it is in. A cancel is a request from the
// client, not a state: the scheduler keeps the cancelled sequences in a list
// and ends each at the next iteration, or, in the middle of a copy, when
// the copy lands.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_types.hpp"
#include "engine/speculation.hpp"

namespace conveyor {

enum class SeqState : uint8_t {
  waiting,       // queued; holds no KV (new, preempted for recompute, or after a fault)
  running,       // in the batch, its KV in device blocks
  forking,       // running, and the outstanding step samples its first token: its other
                 // samples fork from it when that step's result arrives; it sits out until then
  padding,       // static-padded batching: ended for its client, decoding on until its batch ends
  swapping_out,  // preempted by swap: its blocks are being copied to host memory
  swapped,       // its KV only in host memory
  swapping_in,   // its blocks are being copied back; it runs again once they land
};
const char* to_string(SeqState state);

struct Sequence {
  // ---- who it is -----------------------------------------------------------
  seq_id id = 0;
  request_id request = 0;           // the request it samples for
  int32_t index = 0;                // which sample
  int32_t samples = 1;              // n: samples it forks into at its first token (then 1)
  int32_t priority = 0;             // lower runs sooner (GenerateRequest::priority)
  std::string tenant;               // GenerateRequest::tenant
  uint64_t arrival = 0;             // submission order
  double arrival_time = 0.0;
  SamplingParams sampling;
  std::string session;              // GenerateRequest::session

  // ---- its tokens, and how far the KV cache holds them ---------------------
  std::vector<int32_t> tokens;      // prompt, then generated tokens
  int32_t prompt_len = 0;
  int32_t num_computed = 0;         // leading tokens whose KV is in the cache
  int32_t scheduled = 0;            // ... or is being computed by an outstanding step
  int32_t unconfirmed = 0;          // tokens outstanding steps sample for it
  int32_t slots = 0;                // tokens the block manager holds slots for
  int32_t committed = 0;            // computed tokens the block manager has been told of (SeqProgress)
  int32_t generated() const { return int32_t(tokens.size()) - prompt_len; }
  // The end-of-sequence (or stop_token_ids) token that ended it (1) or none (0): never in
  // `tokens`, but counted in its completion tokens, as llama.cpp and vLLM
  // count it (the model computed it like any other).
  int32_t stop_tokens = 0;
  // Its length once the outstanding steps' samples arrive.
  int32_t length() const { return int32_t(tokens.size()) + unconfirmed; }

  // ---- its KV blocks ---------------------------------------------------------
  std::vector<int32_t> block_table;
  int32_t blocks_held = 0;

  // ---- speculative decoding (engine/speculation.hpp) -------------------------
  std::vector<int32_t> drafts;      // proposed for the step being planned, which verifies them
  DraftLength draft_length;         // how many to propose next
  // Jump-forward under a grammar: where its generated tokens (the first
  // `grammar_fed` of them) put the grammar. Made when first needed; a fork
  // starts its own. Null also once the grammar refused a token (then no
  // jump-forward for it).
  std::shared_ptr<grammar::Matcher> grammar_matcher;
  int32_t grammar_fed = 0;
  bool grammar_lost = false;

  // ---- its part in the steps -------------------------------------------------
  uint64_t last_plan = 0;           // the last step that included it
  int32_t plan_slot = -1;           // index in the iteration being built
  bool runner_has_sampler = false;  // the runner holds a Sampler for it (until it is retired)

  // ---- the prefix blocks it computes for others (shared-prefix waits) --------
  struct PrefixClaims {
    uint64_t claimed_at = 0;        // the iteration in which it last claimed blocks
    std::vector<uint64_t> hashes;   // the claims it owns
    bool waited = false;            // it waited once (counted in prefix_waits)
  } prefix;

  // ---- its prompt's logprobs, when asked for (GenerateRequest::prompt_logprobs) --
  struct PromptScoring {
    int32_t top = -1;                   // alternatives per position; -1: not asked for
    std::vector<PromptLogprob> scores;  // prompt tokens 1 .. scores.size(), as they arrive
    bool delivered = false;             // sent with its first event
    // Positions are still to be scored: its prefill computes every prompt
    // position, bypassing the prefix cache.
    bool pending() const { return top >= 0 && !delivered; }
  } prompt_scoring;

  // ---- what happened to it -----------------------------------------------------
  // The prefix-cache hit at its first admission; nullopt until then.
  std::optional<int32_t> cached_prompt_tokens;
  int32_t fault_retries = 0;        // engine restarts it went through

  // ---- its state, and the transitions that change it ---------------------------
  SeqState state() const { return state_; }
  // In the running set: running, forking or padding.
  bool in_batch() const {
    return state_ == SeqState::running || state_ == SeqState::forking || state_ == SeqState::padding;
  }
  void admit() { move(SeqState::waiting, SeqState::running); }
  void plan_fork() { move(SeqState::running, SeqState::forking); }
  void forked() { move(SeqState::forking, SeqState::running); }
  void end_into_padding() { move(SeqState::running, SeqState::padding); }
  void start_swap_out() { move(SeqState::running, SeqState::swapping_out); }
  void swap_out_done() { move(SeqState::swapping_out, SeqState::swapped); }
  void start_swap_in() { move(SeqState::swapped, SeqState::swapping_in); }
  void swap_in_done() { move(SeqState::swapping_in, SeqState::running); }
  // Preempted for recompute (running), or a swap-out the block manager refused.
  void requeue();
  void restart() { state_ = SeqState::waiting; }

 private:
  // Throws std::logic_error when the sequence is not in `from`: the
  // scheduler broke its own rules, and must not go on as if it had not.
  void move(SeqState from, SeqState to);
  SeqState state_ = SeqState::waiting;
};

}  // namespace conveyor
