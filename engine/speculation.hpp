// Speculative decoding without draft weights: the scheduler proposes a few
// tokens that a decoding sequence is likely to write next, and one step
// verifies them all.
//
// A verify step feeds a sequence's last token and its k drafts as one span
// of k + 1 positions through the paged KV cache and asks for the logits of
// every position (ForwardBatch::want_logits counts them). The runner samples
// row 0 with the sequence's own sampler, exactly as a plain decode would;
// while the sampled token equals the next draft it samples the next row
// (whose logits saw that draft, now a real token), and it stops at the
// first mismatch. So a step emits between 1 and k + 1 tokens, and each one
// is the token the sampler would have drawn without speculation: the same
// generator draw, the same penalties and grammar state. Greedy output is
// unchanged, and so is a seeded sampled stream; an unseeded stream keeps the
// target distribution, since every emitted token is a draw from it. (With a
// proposer that names one token per position, "draw from the target and
// compare" accepts a draft with probability p(draft), which is what the
// rejection sampling of Leviathan et al. gives for such a proposal.) The KV
// of rejected positions stays in slots the sequence holds and is overwritten
// when those positions are computed again; the block manager only hashes
// full computed blocks, whose tokens it is told then (SeqProgress).
//
// Proposers: ngram (prompt lookup): the continuation of the latest earlier
// occurrence of the last n tokens (n from ngram_max down to ngram_min) in
// the sequence's prompt and output. suffix: the same, and in the tokens of
// recently finished requests (engine/suffix_store.hpp), where an agent's
// earlier calls often wrote what it writes now; the longer match wins. Jump-forward, for a sequence under a
// grammar (structured outputs, tool calls): the bytes the grammar forces
// next (`{"name": "` after `{` in a schema), as the longest tokens that
// spell them. Verified like any draft, a forced token costs a row of the
// step instead of a step of its own; where the grammar allows several
// tokenizations of the forced bytes, the model's choice stands.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace conveyor {
namespace grammar {
class CompiledGrammar;
class Matcher;
}  // namespace grammar

enum class SpeculativeMethod : uint8_t {
  none,
  ngram,   // prompt lookup in the sequence's own tokens
  suffix,  // the same, and in recent requests' tokens (SuffixStore): the longer match wins
  draft,   // a small model with the same vocabulary (SpeculativeConfig::draft_model), run
           // by the runner: the plan holds kModelDraft where its drafts go
};

// A draft token the runner's draft model writes before the forward pass
// (engine_types.hpp's placeholder -1 is a token the previous step samples).
inline constexpr int32_t kModelDraft = -2;

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::none;
  std::string draft_model;    // method draft: the draft model's file (a GGUF or any load_model spec)
  int32_t num_tokens = 5;     // the most drafts per step (vLLM's num_speculative_tokens)
  int32_t ngram_min = 1;      // the shortest suffix matched (vLLM's prompt_lookup_min)
  int32_t ngram_max = 4;      // the longest (prompt_lookup_max)
  // No drafts while more sequences than this decode in one step: a large
  // batch keeps the machine busy already, and verifying rows costs more
  // than the steps it saves (vLLM's disable_by_batch_size).
  int32_t disable_batch = 4;
  // Jump-forward drafts for sequences under a grammar, with or without a
  // method (on where the runner verifies drafts).
  bool jump_forward = true;
  // A proposer is configured (the method; jump_forward is not counted).
  bool enabled() const { return method != SpeculativeMethod::none && num_tokens > 0; }
  // Some sequence may get drafts.
  bool drafts() const { return num_tokens > 0 && (method != SpeculativeMethod::none || jump_forward); }
};

// `--speculative`: "none", "ngram", "suffix" or "draft:FILE".
struct SpeculativeChoice {
  SpeculativeMethod method = SpeculativeMethod::none;
  std::string draft_model;  // draft's FILE
};
Expected<SpeculativeChoice> parse_speculative(std::string_view text);
const char* to_string(SpeculativeMethod method);
std::string to_string(const SpeculativeChoice& choice);
// Ranges (num_tokens 0..16, 1 <= ngram_min <= ngram_max <= 16,
// disable_batch >= 1), and a draft model exactly with method draft; the
// message names the flag.
Status validate(const SpeculativeConfig& config);

// Prompt lookup: appends to `drafts` (cleared first) the up to `k` tokens
// that followed the latest earlier occurrence of the last n tokens of
// `tokens`, trying n from max_n down to min_n; none when nothing matches.
// A continuation that reaches the end of `tokens` goes on with the drafts
// themselves (a cycle shorter than k repeats). Returns n (0: no match).
int32_t propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k,
                   std::vector<int32_t>& drafts);

// Jump-forward: appends to `drafts` (cleared first) up to `k` tokens that
// spell the bytes `matcher` (at the sequence's position in `grammar`) forces
// next, each the longest token that the forced bytes start with and the
// grammar accepts there, and the tokens it forces (Matcher::forced_token),
// as long as the forced bytes end where a drafted token ends. The matcher is
// left where it was.
void propose_forced(const grammar::CompiledGrammar& grammar, grammar::Matcher& matcher, int32_t k,
                    std::vector<int32_t>& drafts);

// A sequence's draft length, adapted to how many of its drafts are
// accepted: after a step that accepted all it drafted the next may draft one
// more (up to the configured most), after one that accepted a of them it
// drafts a + 1. After verify steps that accepted nothing twice in a row it
// drafts nothing for 2, 4, ... up to 32 of its steps, so that text the
// proposer cannot predict costs no verify rows.
struct DraftLength {
  int32_t next = 0;           // drafts to ask the proposer for (0: not set yet)
  int32_t misses = 0;         // verify steps in a row that accepted nothing
  int32_t pause = 0;          // steps left without drafts
  void update(int32_t drafted, int32_t accepted, int32_t most);
  // Whether this step may draft (counts a paused step down).
  bool may_draft();
};

}  // namespace conveyor
