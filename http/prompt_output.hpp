// What a completion or chat answer shows of its prompt: the legacy
// completions `echo` (the prompt's text first in each choice's text, and with
// `logprobs` the prompt's tokens first in its logprobs) and vLLM's
// `prompt_logprobs` (per prompt token after the first, its logprob, rank and
// the K most likely alternatives: on each completions choice, at the top of
// a chat response).
//
// Both come from the engine's prompt logprobs (GenerateRequest::
// prompt_logprobs), asked for with the larger of the two counts, on each
// sample's first event.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_types.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::http {

struct PromptOutput {
  bool echo = false;
  std::vector<std::string> texts;   // echo: each prompt's text, as the choices' texts start
  // echo with max_tokens 0 (scoring a text, as vLLM allows): the engine
  // samples one token, which every choice drops; the prompt is the answer.
  bool score_only = false;
  int32_t logprobs = -1;            // echo: the request's logprobs (the prompt part's alternatives)
  int32_t prompt_logprobs = -1;     // vLLM's prompt_logprobs; -1: not asked
  // What the engine computes for both (-1: neither asks).
  int32_t engine_top() const { return std::max(prompt_logprobs, echo && logprobs >= 0 ? logprobs : -1); }
  bool wants_scores() const { return engine_top() >= 0; }
};

}  // namespace conveyor::http
