// Tool calling on /v1/chat/completions: the declared tools, and the model's
// output turned into OpenAI `tool_calls`.
//
// The tools reach the prompt through the model's own chat template; what the
// model writes back follows its family's convention (tool_call_format.hpp).
// ToolCallStream reads that text as it is generated and splits it into
// content and call fragments, the shape of OpenAI's streamed
// `delta.tool_calls`: a call's first fragment carries its index, id and name,
// the next ones pieces of its arguments. Arguments are compact JSON: the
// model's whitespace outside strings is dropped, so the pieces of a call
// join into the same text however the output was cut into deltas.
//
// Nothing is emitted for a call before its name is known: text that starts
// like a call but turns out not to be one (a brace that opens prose, a
// malformed object) is given back as content. Once a call has begun, a
// malformed rest becomes content from the point where it broke.
// parse_tool_calls() reads a whole output the same way, so an answer has the
// same content and calls streamed or not: a call that max_tokens cut short
// is a call whose arguments are cut short too (as OpenAI's are), with
// calls_complete false. (vLLM gives such an answer's whole text as content
// when not streaming, and the calls when streaming.)
//
// Thread-safety: a ToolCallStream belongs to one choice of one request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

#include "base/status.hpp"
#include "http/tool_call_format.hpp"

namespace conveyor::http {

// One entry of the request's `tools`.
struct ToolSpec {
  std::string name;                // [a-zA-Z0-9_-]{1,64}, unique in the request
  std::string description;
  boost::json::value parameters;   // a JSON Schema of type object ({} given as none)
  bool strict = true;              // the constraint forbids properties the schema does not list
};

// The `tools` array as sent: each {"type": "function", "function": {"name",
// "description", "parameters", "strict"}}. The error (invalid_argument) says
// which tool and what is wrong with it.
Expected<std::vector<ToolSpec>> parse_tools(std::string_view tools_json);

// "call_" and 24 random letters and digits; Mistral's templates insist on 9
// letters and digits, so its calls get those.
std::string make_tool_call_id(ToolCallFormat format);

// A piece of one call, as streamed.
struct ToolCallDelta {
  int32_t index = 0;      // the call's position in this answer
  std::string id;         // first fragment only
  std::string name;       // first fragment only
  std::string arguments;  // a piece of the arguments' JSON text
  bool first = false;     // this fragment opens the call (id and name set)
};

// What a piece of output became.
struct ToolCallOutput {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

class ToolCallStream {
 public:
  using IdMaker = std::function<std::string()>;
  // `make_id` names each call (default: make_tool_call_id(format)).
  explicit ToolCallStream(ToolCallFormat format, IdMaker make_id = {});
  ToolCallStream(ToolCallStream&&) noexcept;
  ToolCallStream& operator=(ToolCallStream&&) noexcept;
  ~ToolCallStream();

  // Reads the next piece of output; appends what is certain now to `out`.
  // Bytes that may still open a call are held back, and so is whitespace at
  // the start or after a call, which is dropped when a call follows it or
  // the answer ends after calls.
  void feed(std::string_view text, ToolCallOutput& out);
  // The output ended: appends what was held back. `cut_short`: it stopped
  // at its token limit, so a call opened by the format's trigger
  // (`<tool_call>`, `[TOOL_CALLS]`) and cut before its name is a call cut
  // off, dropped (calls_complete() turns false), not text to give back. A
  // bare `{` or `[` that may have begun a JSON answer is given back.
  void finish(ToolCallOutput& out, bool cut_short = false);

  int32_t calls_started() const;
  // After finish(): every call that began ended well (its object closed and
  // nothing after it broke the format).
  bool calls_complete() const;

  struct State;  // the reader's state machine (tool_call_parser.cpp)

 private:
  std::unique_ptr<State> s_;
};

// A whole answer: content (nullopt when there are calls and only whitespace
// around them) and the calls, as the streamed fragments join into.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // compact JSON text of an object
};
struct ParsedAnswer {
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
  bool calls_complete = true;  // ToolCallStream::calls_complete()
};
// `cut_short`: the answer stopped at its token limit (ToolCallStream::finish).
ParsedAnswer parse_tool_calls(ToolCallFormat format, std::string_view text, ToolCallStream::IdMaker make_id = {},
                              bool cut_short = false);

// Joins streamed fragments into calls (tests, and parse_tool_calls).
void append_deltas(const std::vector<ToolCallDelta>& deltas, std::vector<ToolCall>& calls);

}  // namespace conveyor::http
