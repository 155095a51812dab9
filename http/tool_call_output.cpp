#include "http/tool_call_output.hpp"

#include <boost/json.hpp>

namespace conveyor::http {

namespace json = boost::json;

std::string ToolCallChoice::read(std::string_view text, FinishReason finish, json::array& calls) {
  ToolCallOutput out;
  stream_.feed(text, out);
  if (finish != FinishReason::none) stream_.finish(out, finish == FinishReason::length);
  for (ToolCallDelta& d : out.calls) {
    json::object function;
    if (d.first) function["name"] = d.name;
    function["arguments"] = d.arguments;
    json::object entry{{"index", d.index}};
    if (d.first) {
      entry["id"] = d.id;
      entry["type"] = "function";
      called_ = true;
    }
    entry["function"] = std::move(function);
    calls.push_back(std::move(entry));
  }
  return std::move(out.content);
}

json::object ToolCallChoice::message(const std::string& text, FinishReason finish) const {
  ParsedAnswer answer = parse_tool_calls(format_, text, {}, finish == FinishReason::length);
  json::object message{{"role", "assistant"}};
  message["content"] = answer.content ? json::value(*answer.content) : json::value(nullptr);
  if (answer.calls.empty()) return message;
  json::array calls;
  for (ToolCall& call : answer.calls) {
    calls.push_back(json::object{
        {"id", std::move(call.id)},
        {"type", "function"},
        {"function", json::object{{"name", std::move(call.name)}, {"arguments", std::move(call.arguments)}}}});
  }
  message["tool_calls"] = std::move(calls);
  return message;
}

const char* ToolCallChoice::finish_reason(bool called, FinishReason engine) {
  return called && engine == FinishReason::stop ? "tool_calls" : to_string(engine);
}

}  // namespace conveyor::http
