#include "http/tool_call_fields.hpp"

#include <boost/json.hpp>

#include "http/tool_calls.hpp"

namespace conveyor::http {

namespace json = boost::json;

std::optional<ApiError> parse_tools_field(std::string_view text, ApiRequest& request) {
  auto tools = parse_tools(text);
  if (!tools) return bad_request(tools.error().message, "tools");
  if (tools->empty()) request.tools_json.clear();
  else request.tools_json.assign(text);
  return std::nullopt;
}

std::optional<ApiError> parse_tool_choice_field(std::string_view text, ToolChoice& out) {
  constexpr const char* kWant =
      "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
      "{\"name\": ...}}";
  boost::system::error_code ec;
  const json::value v = json::parse(text, ec);
  if (ec) return bad_request(kWant, "tool_choice");
  if (const json::string* mode = v.if_string()) {
    if (*mode == "none") out.mode = ToolChoice::Mode::none;
    else if (*mode == "auto") out.mode = ToolChoice::Mode::automatic;
    else if (*mode == "required") out.mode = ToolChoice::Mode::required;
    else return bad_request(kWant, "tool_choice");
    return std::nullopt;
  }
  const json::object* choice = v.if_object();
  const json::value* type = choice ? choice->if_contains("type") : nullptr;
  if (type == nullptr || !type->is_string() || type->get_string() != "function") return bad_request(kWant, "tool_choice");
  const json::value* fn = choice->if_contains("function");
  const json::value* name = fn && fn->is_object() ? fn->get_object().if_contains("name") : nullptr;
  if (name == nullptr || !name->is_string()) return bad_request(kWant, "tool_choice");
  out.mode = ToolChoice::Mode::function;
  out.function = json::value_to<std::string>(*name);
  return std::nullopt;
}

std::optional<ApiError> check_tool_fields(const ApiRequest& request) {
  const bool has_tools = !request.tools_json.empty();
  if (has_tools && !request.chat) return bad_request("'tools' needs a chat request ('messages')", "tools");
  const ToolChoice::Mode mode = request.tool_choice.mode;
  if (mode == ToolChoice::Mode::required && !has_tools)
    return bad_request("'tool_choice' \"required\" needs 'tools'", "tool_choice");
  if (mode != ToolChoice::Mode::function) return std::nullopt;
  if (has_tools) {
    auto tools = parse_tools(request.tools_json);
    if (tools) {
      for (const ToolSpec& t : *tools)
        if (t.name == request.tool_choice.function) return std::nullopt;
    }
  }
  return bad_request("'tool_choice' names the function '" + request.tool_choice.function +
                         "', which is not among the tools",
                     "tool_choice");
}

std::optional<ApiError> parse_message_tool_calls(std::string_view text, std::string& out) {
  constexpr const char* kWant =
      "an assistant message's 'tool_calls' must be an array of {\"id\", \"type\": \"function\", \"function\": "
      "{\"name\", \"arguments\"}}";
  boost::system::error_code ec;
  const json::value v = json::parse(text, ec);
  const json::array* calls = ec ? nullptr : v.if_array();
  if (calls == nullptr) return bad_request(kWant, "messages");
  for (const json::value& c : *calls) {
    const json::object* call = c.if_object();
    const json::value* fn = call ? call->if_contains("function") : nullptr;
    const json::object* f = fn ? fn->if_object() : nullptr;
    const json::value* name = f ? f->if_contains("name") : nullptr;
    if (name == nullptr || !name->is_string()) return bad_request(kWant, "messages");
    const json::value* args = f->if_contains("arguments");
    if (args != nullptr && !args->is_string() && !args->is_object() && !args->is_null())
      return bad_request("a tool call's 'arguments' must be a JSON string (or an object)", "messages");
  }
  out.assign(text);
  return std::nullopt;
}

}  // namespace conveyor::http
