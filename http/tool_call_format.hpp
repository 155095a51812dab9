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
#include <vector>

#include "base/status.hpp"

namespace conveyor {
class Tokenizer;
}

namespace conveyor::http {

enum class ToolCallFormat : uint8_t { llama3_json, hermes, mistral };

// Mistral's markers: the one that opens calls, and the newer form's one
// between a call's name and its arguments.
inline constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
inline constexpr std::string_view kMistralArgs = "[ARGS]";

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

// How a model frames its calls: its family's format and, for Mistral, which
// of the two forms its template writes and which of the markers its
// vocabulary holds as control tokens (one id, no bytes).
struct ToolCallSyntax {
  ToolCallFormat format = ToolCallFormat::hermes;
  // mistral: [TOOL_CALLS]f[ARGS]{...} per call (the template writes [ARGS])
  // rather than one [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]
  bool named_calls = false;
  int32_t call_token = -1;  // mistral: [TOOL_CALLS] as a control token; -1: written as text
  int32_t args_token = -1;  // mistral: [ARGS] likewise
  // The control tokens the output's text must show (RequestSpec::shown_tokens):
  // decoding drops control tokens, and the call parser reads the markers.
  std::vector<int32_t> shown_tokens() const;
};

// The syntax of `format` for a model with this chat template (its source)
// and vocabulary (null: none, so every marker is text).
ToolCallSyntax tool_call_syntax(ToolCallFormat format, std::string_view template_source, const Tokenizer* tokenizer);

}  // namespace conveyor::http
