// Parsing a Responses API request (POST /v1/responses) into the chat
// machinery's terms.
//
//   instructions            a system message in front of the conversation
//   input                   a string (one user message) or items:
//     {"role", "content"}             a message (type "message" or none); roles
//                                     user | assistant | system | developer
//                                     (developer becomes system); content a
//                                     string or input_text / output_text parts
//     {"type": "function_call", "call_id", "name", "arguments"}
//                                     the assistant's tool call (consecutive
//                                     calls join one assistant message)
//     {"type": "function_call_output", "call_id", "output"}
//                                     a tool message answering that call
//   tools                   function tools {"type": "function", "name",
//                           "description", "parameters", "strict"}, rewritten
//                           into chat's {"type": "function", "function": {...}}
//   tool_choice             "none" | "auto" | "required" | {"type": "function", "name"}
//   text.format             text | json_object | json_schema {name, schema, strict}
//                           -> ApiRequest::constraint (field "text.format")
//   max_output_tokens, temperature, top_p, stream, user, parallel_tool_calls,
//   store (default true), metadata (up to 16 string pairs), previous_response_id,
//   and conveyor's sampling extensions (top_k, min_p, seed, ...).
//
// Other item types, content parts, tool types and fields are refused by name
// (400 with `param`); harmless values pass ("truncation": "disabled",
// "background": false, ...). The field table is responses_fields().
//
// Thread-safety: any thread.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "http/api_types.hpp"
#include "http/request_fields.hpp"
#include "http/responses_output.hpp"

namespace conveyor::http {

struct ResponsesRequest {
  // The chat request of this turn: its input as messages (instructions and
  // any stored conversation not yet in front), tools in chat's shape,
  // tool_choice, constraint, sampling, max_tokens, stream, user.
  ApiRequest chat;
  std::optional<std::string> instructions;
  std::string previous_response_id;  // "": a new conversation
  std::string input_items_json;      // the input as OpenAI's items (responses_input.hpp)
  ResponseEcho echo;                 // the settings as the response object repeats them
};

inline constexpr size_t kMaxMetadataPairs = 16;

std::variant<ResponsesRequest, ApiError> parse_responses_request(std::string_view body);

// Every field of a Responses request, implemented or refused (the row's
// scope is 0: the table is the Responses API's own).
std::span<const RequestField> responses_fields();

}  // namespace conveyor::http
