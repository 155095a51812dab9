// How a model family writes a tool call in its output, and the serve setting
// that picks it (--tool-call-parser, key server.tool_call_parser). Kept apart
// from tool_calls.hpp so that server_options.hpp stays free of Boost.JSON.
//
//   llama3_json  Llama 3.x: {"name": "f", "parameters": {...}} (after
//                <|python_tag|>, or as the whole answer), several separated
//                by ';' or newlines
//   hermes       Hermes 2/3, Qwen 2.5 and later: <tool_call>\n{"name": "f",
//                "arguments": {...}}\n</tool_call>, repeated
//   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...], or the
//                newer [TOOL_CALLS]f[ARGS]{...}
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.hpp"

namespace conveyor::http {

enum class ToolCallFormat : uint8_t { llama3_json, hermes, mistral };

// The setting: a format, or auto (the one the chat template shows).
enum class ToolCallParser : uint8_t { automatic, llama3_json, hermes, mistral };

const char* to_string(ToolCallFormat format);
const char* to_string(ToolCallParser parser);
// "auto" | "llama3_json" | "hermes" | "mistral"; anything else is invalid_argument.
Expected<ToolCallParser> parse_tool_call_parser(std::string_view name);

// The format a chat template's source shows: "[TOOL_CALLS]" mistral,
// "<tool_call>" hermes, Llama 3's markers ("<|python_tag|>", "ipython",
// "<|start_header_id|>") llama3_json; otherwise hermes, the convention most
// open models were tuned on.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// The format to use: the setting's, or (automatic) the detected one.
ToolCallFormat resolve_tool_call_format(ToolCallParser setting, std::string_view template_source);

}  // namespace conveyor::http
