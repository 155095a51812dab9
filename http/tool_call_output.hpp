// Tool calls in the chat answers completion_job.hpp writes: one choice's
// text read for calls (tool_calls.hpp) and written as OpenAI's JSON.
//
//   streamed   delta.content for what is prose, delta.tool_calls fragments
//              [{"index", "id", "type": "function", "function": {"name",
//              "arguments": ""}}] then [{"index", "function": {"arguments":
//              "..."}}]
//   whole      message.content (null when there are only calls) and
//              message.tool_calls [{"id", "type", "function": {"name", "arguments"}}]
// A choice that called a tool and stopped on its own ends with
// finish_reason "tool_calls"; one cut short by max_tokens stays "length".
//
// Thread-safety: one object per choice, on its job's strand.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "engine/stream_event.hpp"
#include "http/tool_calls.hpp"

namespace conveyor::http {

class ToolCallChoice {
 public:
  explicit ToolCallChoice(ToolCallFormat format) : format_(format), stream_(format) {}

  // Streaming: reads this event's `text` (`finish`: the last one's reason,
  // else FinishReason::none). Returns the prose to send as content; `calls`
  // gets the delta.tool_calls entries. A call cut off by the token limit
  // (finish length) before its name is dropped, not sent as text.
  std::string read(std::string_view text, FinishReason finish, boost::json::array& calls);

  // Whole: the message for the choice's whole text (with "tool_calls" when
  // it made calls), which ended for `finish`.
  boost::json::object message(const std::string& text, FinishReason finish) const;

  // "tool_calls" when calls were made and the model stopped by itself, else
  // the engine's reason.
  static const char* finish_reason(bool called, FinishReason engine);
  // read() has sent a call.
  bool called() const { return called_; }

 private:
  ToolCallFormat format_;
  ToolCallStream stream_;
  bool called_ = false;
};

}  // namespace conveyor::http
