// The JSON of http/prompt_output.hpp's answers (completion_job.cpp writes
// them). Internal to http/.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <span>

#include "engine/engine_types.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::http::detail {

// vLLM's prompt_logprobs: null for the first prompt token, then for each
// next one {"<id>": {"logprob", "rank", "decoded_token"}, ...}: the prompt's
// token, then the `top` most likely tokens that are not it.
boost::json::array prompt_logprobs_json(const Tokenizer* tok, std::span<const PromptLogprob> scores, int32_t top);

// The legacy completions logprobs lists (tokens, token_logprobs,
// top_logprobs, text_offset) of an echoed prompt: its first token's logprob
// and alternatives null, as OpenAI and vLLM write them; then each token's
// score with its `top` most likely alternatives. text_offset counts
// characters (code points, as OpenAI and vLLM count them) on from `offset`
// into `text`, the prompt as the answer echoes it: the bytes its tokens have
// and the text does not show first (a BOS, the space a SentencePiece
// tokenizer puts before the first word) are no offset of it. `offset` ends
// past `text`.
struct LogprobLists {
  boost::json::array tokens, token_logprobs, top_logprobs, text_offset;
};
void append_prompt_logprobs(const Tokenizer* tok, std::span<const int32_t> prompt,
                            std::span<const PromptLogprob> scores, int32_t top, std::string_view text,
                            LogprobLists& out, size_t& offset);

// The text_offset of a token of `bytes` after `chars` characters of text:
// `chars`, or the character before when the token begins inside it (a byte
// token that continues a character). `chars` then grows by the token's own.
size_t next_text_offset(std::string_view bytes, size_t& chars);

}  // namespace conveyor::http::detail
