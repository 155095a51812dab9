// The request fields of tool calling, as api_request.cpp reads them: `tools`,
// `tool_choice`, and an assistant message's `tool_calls`. Each takes the
// field's JSON text as sent and returns the 400 naming what is wrong.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/api_types.hpp"

namespace conveyor::http {

// `tools`: validated (tool_calls.hpp's parse_tools) and kept as sent in
// request.tools_json; an empty array is no tools.
std::optional<ApiError> parse_tools_field(std::string_view json, ApiRequest& request);

// "none" | "auto" | "required" | {"type": "function", "function": {"name": ...}}.
std::optional<ApiError> parse_tool_choice_field(std::string_view json, ToolChoice& out);

// After every field was read: a tool_choice that names a function needs it
// among the tools, `required` needs tools, and tools need a chat request.
std::optional<ApiError> check_tool_fields(const ApiRequest& request);

// A message's `tool_calls`: [{"id", "type": "function", "function": {"name",
// "arguments"}}, ...], arguments a JSON string (as OpenAI sends them) or an
// object. Kept as sent in `out`.
std::optional<ApiError> parse_message_tool_calls(std::string_view json, std::string& out);

}  // namespace conveyor::http
