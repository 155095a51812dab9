// The Responses API's response object (OpenAI's `Response`), as POST
// /v1/responses answers, the streaming events carry and GET returns:
//
//   {"id": "resp_...", "object": "response", "created_at", "status", "model",
//    "output": [message and function_call items], "usage": {...},
//    "previous_response_id", "instructions", "tools", "tool_choice", "text",
//    "temperature", "top_p", "max_output_tokens", "parallel_tool_calls",
//    "metadata", "user", "store", "incomplete_details", "error", ...}
//
// An output item is a message {"type": "message", "id": "msg_...", "role":
// "assistant", "status", "content": [{"type": "output_text", "text",
// "annotations": []}]} or a function call {"type": "function_call", "id":
// "fc_...", "call_id": "call_...", "name", "arguments", "status"}.
//
// The request's settings are echoed as the client sent them (compact JSON
// kept by the parser, responses_request.hpp). This header does not include
// Boost; responses_json.hpp has the Boost.JSON side.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "http/api_types.hpp"

namespace conveyor::http {

struct OutputItem {
  enum class Kind : uint8_t { message, function_call };
  Kind kind = Kind::message;
  std::string id;         // "msg_..." or "fc_..."
  std::string status;     // in_progress | completed | incomplete
  std::string text;       // message: the output_text
  std::string call_id;    // function_call: "call_..."
  std::string name;       // function_call
  std::string arguments;  // function_call: JSON text
};

// The request's settings, as the response object repeats them.
struct ResponseEcho {
  std::string previous_response_id;  // "": null
  std::optional<std::string> instructions;
  std::string tools_json = "[]";     // Responses-format tools, as sent
  std::string tool_choice_json = "\"auto\"";
  std::string text_json = "{\"format\":{\"type\":\"text\"}}";
  std::string metadata_json = "{}";
  std::optional<double> temperature, top_p;
  std::optional<int32_t> max_output_tokens;
  bool parallel_tool_calls = true;
  bool store = true;
  std::string user;                  // "": left out
};

struct ResponseUsage {
  int64_t input_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t output_tokens = 0;
};

struct ResponseState {
  std::string id;          // "resp_..."
  int64_t created_at = 0;  // unix seconds
  // in_progress | completed | incomplete (max_output_tokens) | failed | cancelled
  std::string status = "in_progress";
  std::string model;
  std::vector<OutputItem> output;
  std::optional<ResponseUsage> usage;  // once it ended
  std::string incomplete_reason;       // "max_output_tokens" when status is incomplete
  std::optional<ApiError> error;       // status failed
  ResponseEcho echo;
};

// A new message item (id "msg_...") and a new function_call item (id "fc_...").
OutputItem message_item(std::string status, std::string text = {});
OutputItem function_call_item(std::string call_id, std::string name, std::string arguments, std::string status);

// The response object as JSON text.
std::string response_json(const ResponseState& response);

// A new item id: "msg_", "fc_" or "call_" + 24 hex digits (any thread).
std::string make_item_id(const char* prefix);

}  // namespace conveyor::http
