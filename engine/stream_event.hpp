// What a client of the engine receives for its request: text as it is
// produced, and a last event that says why the request ended (with n > 1
// samples, such a stream per sample, told apart by `index`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine_types.hpp"
#include "base/status.hpp"

namespace conveyor {

struct StreamEvent {
  request_id id = 0;
  int32_t index = 0;                  // the sample (0 .. n-1) this event belongs to
  std::string text;                   // new text, always whole UTF-8 characters
  std::vector<int32_t> token_ids;     // the tokens behind `text` (may be more than one)
  std::vector<SampleResult> logprobs; // per token, when logprobs were asked for
  FinishReason finish = FinishReason::none;  // none: more events follow
  // On the last event. When a stop string ended the sample, the stream actor
  // ends it itself, before the scheduler's final event: then prompt_tokens
  // and cached_prompt_tokens are 0 (completion_tokens is right).
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;
  int32_t completion_tokens = 0;
  Errc error_code = Errc::invalid_argument;  // meaningful when finish == error
  std::string message;                // why, when finish == error
  // With finish == error: the engine refused the request when it was
  // submitted (a full waiting queue, a request it cannot run), so it did no
  // work for it.
  bool refused = false;
  // On a sample's first event, when the request asked for prompt_logprobs
  // (TokenEvent::prompt_logprobs).
  std::vector<PromptLogprob> prompt_logprobs;

  // The last event of its sample. A request with n samples ends after n of
  // these (one per index), in the order its samples finish.
  bool last() const { return finish != FinishReason::none; }
};

}  // namespace conveyor
