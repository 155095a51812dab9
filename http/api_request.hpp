// Parsing an OpenAI-format request body (simdjson on-demand).
//
// Checks JSON syntax (trailing content included), the type of every known
// field, and the ranges that need no model (logprobs, number of prompts and
// stop strings). What needs the model or the engine (sampling ranges against
// the vocabulary, prompt length, the model name, n against max_num_seqs) is
// the planner's job (request_plan.hpp). Fields conveyor does not implement,
// and fields it does not know, are refused by name (request_fields.hpp);
// `null` counts as absent.
//
// Thread-safety: any thread; each thread parses with its own parser.
#pragma once

#include <optional>
#include <string_view>

#include "http/api_types.hpp"

namespace conveyor::http {

inline constexpr size_t kMaxPrompts = 64;            // prompts in one completion request
inline constexpr size_t kMaxStopStrings = 16;

struct ParseResult {
  ApiRequest request;
  std::optional<ApiError> error;  // set: answer with it (400)
};

// `endpoint` decides what is required: `prompt` for completions, `messages`
// for chat; on the WebSocket either one plus an `id`, or a cancel.
ParseResult parse_api_request(std::string_view body, Endpoint endpoint);

}  // namespace conveyor::http
