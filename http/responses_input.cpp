#include "http/responses_input.hpp"

#include <algorithm>
#include <initializer_list>
#include <unordered_map>

#include "http/api_json.hpp"

namespace conveyor::http::responses {
namespace {

namespace json = boost::json;

// Pieces joined by append: g++ 12 warns (falsely, -Wrestrict) on chains of +.
std::string cat(std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (std::string_view p : pieces) out.append(p);
  return out;
}

// A member that must be a string when present; absent or null: nullptr.
Fail string_member(const json::object& o, std::string_view key, std::string_view field, const json::string*& out) {
  out = nullptr;
  const json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null()) return {};
  out = v->if_string();
  if (out == nullptr) return type_error(field, "a string");
  return {};
}

Fail required_string(const json::object& o, std::string_view key, std::string_view field, std::string& out) {
  const json::string* s = nullptr;
  if (Fail f = string_member(o, key, field, s)) return f;
  if (s == nullptr) return bad_request(cat({"'", key, "' is required in '", field, "'"}), std::string(field));
  out.assign(s->data(), s->size());
  return {};
}

// content: "text" or parts; input_text, output_text and refusal parts are text.
Fail content_text(const json::value& content, std::string& out) {
  if (const json::string* s = content.if_string()) {
    out.assign(s->data(), s->size());
    return {};
  }
  const json::array* parts = content.if_array();
  if (parts == nullptr) return type_error("input", "items whose content is a string or an array of text parts");
  for (const json::value& part : *parts) {
    const json::object* p = part.if_object();
    const json::value* type = p ? p->if_contains("type") : nullptr;
    if (type == nullptr || !type->is_string()) return type_error("input", "items whose content parts have a 'type'");
    const std::string_view t = type->get_string();
    const char* key = t == "input_text" || t == "output_text" ? "text" : t == "refusal" ? "refusal" : nullptr;
    if (key == nullptr)
      return bad_request(cat({"content parts of type '", t, "' are not supported (text only)"}), "input");
    std::string text;
    if (Fail f = required_string(*p, key, "input", text)) return f;
    out += text;
  }
  return {};
}

Fail message_item(const json::object& item, std::vector<ChatMessage>& out) {
  ChatMessage m;
  if (Fail f = required_string(item, "role", "input", m.role)) return f;
  if (m.role == "developer") m.role = "system";  // chat templates know system, not developer
  if (m.role != "user" && m.role != "assistant" && m.role != "system")
    return bad_request(cat({"input message role '", m.role, "' is not one of user, assistant, system, developer"}),
                       "input");
  const json::value* content = item.if_contains("content");
  if (content == nullptr || content->is_null()) return bad_request("every input message needs 'content'", "input");
  if (Fail f = content_text(*content, m.content)) return f;
  out.push_back(std::move(m));
  return {};
}

// The assistant's call; it joins the assistant message just before it, so a
// turn's calls are one message with several tool_calls, as chat has them.
Fail function_call_item(const json::object& item, std::vector<ChatMessage>& out) {
  std::string call_id, name, arguments;
  if (Fail f = required_string(item, "call_id", "input", call_id)) return f;
  if (Fail f = required_string(item, "name", "input", name)) return f;
  if (Fail f = required_string(item, "arguments", "input", arguments)) return f;
  json::object call{{"id", call_id},
                    {"type", "function"},
                    {"function", json::object{{"name", name}, {"arguments", arguments}}}};
  if (out.empty() || out.back().role != "assistant") out.push_back(chat_message("assistant", ""));
  ChatMessage& m = out.back();
  json::array calls;
  if (!m.tool_calls_json.empty()) calls = json::parse(m.tool_calls_json).as_array();
  calls.push_back(std::move(call));
  m.tool_calls_json = json::serialize(calls);
  return {};
}

Fail function_call_output_item(const json::object& item, std::vector<ChatMessage>& out) {
  ChatMessage m = chat_message("tool", "");
  if (Fail f = required_string(item, "call_id", "input", m.tool_call_id)) return f;
  const json::value* output = item.if_contains("output");
  if (output == nullptr || output->is_null()) return bad_request("a function_call_output needs 'output'", "input");
  if (Fail f = content_text(*output, m.content)) return f;
  out.push_back(std::move(m));
  return {};
}

}  // namespace

ApiError type_error(std::string_view field, std::string_view want) {
  return bad_request(cat({"'", field, "' must be ", want}), std::string(field));
}

ChatMessage chat_message(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

Fail input_messages(const json::value& input, std::vector<ChatMessage>& out) {
  if (const json::string* s = input.if_string()) {
    out.push_back(chat_message("user", std::string(s->data(), s->size())));
    return {};
  }
  const json::array* items = input.if_array();
  if (items == nullptr) return type_error("input", "a string or an array of input items");
  for (const json::value& v : *items) {
    const json::object* item = v.if_object();
    if (item == nullptr) return type_error("input", "an array of objects");
    const json::string* type = nullptr;
    if (Fail f = string_member(*item, "type", "input", type)) return f;
    const std::string_view t = type ? std::string_view(*type) : std::string_view("message");
    Fail f;
    if (t == "message") f = message_item(*item, out);
    else if (t == "function_call") f = function_call_item(*item, out);
    else if (t == "function_call_output") f = function_call_output_item(*item, out);
    else if (t == "item_reference")
      f = bad_request("input items of type 'item_reference' are not supported; continue a conversation with "
                      "previous_response_id",
                      "input");
    else
      f = bad_request(cat({"input items of type '", t,
                           "' are not supported (message, function_call and function_call_output are)"}),
                      "input");
    if (f) return f;
  }
  if (out.empty()) return bad_request("'input' must not be empty", "input");
  return {};
}

json::array input_items(const json::value& input) {
  auto text_part = [](std::string_view role, const json::value& text) {
    return json::object{{"type", role == "assistant" ? "output_text" : "input_text"}, {"text", text}};
  };
  json::array out;
  if (input.is_string()) {
    out.push_back(json::object{{"id", make_response_id("msg_")},
                               {"type", "message"},
                               {"role", "user"},
                               {"status", "completed"},
                               {"content", json::array{text_part("user", input)}}});
    return out;
  }
  for (const json::value& v : input.as_array()) {
    json::object item = v.as_object();
    const json::value* type = item.if_contains("type");
    const bool message = type == nullptr || type->is_null() || *type == "message";
    if (message) {
      item["type"] = "message";
      json::value& content = item["content"];
      if (content.is_string()) content = json::array{text_part(item["role"].as_string(), content)};
    }
    const char* prefix = message ? "msg_" : *type == "function_call" ? "fc_" : "fco_";
    if (const json::value* id = item.if_contains("id"); id == nullptr || !id->is_string())
      item["id"] = make_response_id(prefix);
    if (const json::value* status = item.if_contains("status"); status == nullptr || status->is_null())
      item["status"] = "completed";
    out.push_back(std::move(item));
  }
  return out;
}

Fail chat_tools(const json::value& tools, std::string& chat_json, std::vector<std::string>& names) {
  const json::array* list = tools.if_array();
  if (list == nullptr) return type_error("tools", "an array of tools");
  json::array chat;
  for (const json::value& v : *list) {
    const json::object* tool = v.if_object();
    if (tool == nullptr) return type_error("tools", "an array of objects");
    std::string type;
    if (Fail f = required_string(*tool, "type", "tools", type)) return f;
    if (type != "function")
      return bad_request(cat({"tools of type '", type, "' are not supported (function tools only)"}), "tools");
    json::object function;
    std::string name;
    if (Fail f = required_string(*tool, "name", "tools", name)) return f;
    if (name.empty()) return bad_request("a function tool's 'name' must not be empty", "tools");
    function["name"] = name;
    const json::string* description = nullptr;
    if (Fail f = string_member(*tool, "description", "tools", description)) return f;
    if (description) function["description"] = *description;
    if (const json::value* p = tool->if_contains("parameters"); p && !p->is_null()) {
      if (!p->is_object()) return type_error("tools", "function tools whose 'parameters' is a JSON schema object");
      function["parameters"] = *p;
    }
    if (const json::value* s = tool->if_contains("strict"); s && !s->is_null()) {
      if (!s->is_bool()) return type_error("tools", "function tools whose 'strict' is a boolean");
      function["strict"] = *s;
    }
    names.push_back(name);
    chat.push_back(json::object{{"type", "function"}, {"function", std::move(function)}});
  }
  if (!chat.empty()) chat_json = json::serialize(chat);
  return {};
}

Fail tool_choice(const json::value& choice, const std::vector<std::string>& names, ToolChoice& out) {
  if (const json::string* s = choice.if_string()) {
    if (*s == "none") out.mode = ToolChoice::Mode::none;
    else if (*s == "auto") out.mode = ToolChoice::Mode::automatic;
    else if (*s == "required") out.mode = ToolChoice::Mode::required;
    else return bad_request("'tool_choice' must be \"none\", \"auto\", \"required\" or a function", "tool_choice");
  } else if (const json::object* o = choice.if_object()) {
    std::string type;
    if (Fail f = required_string(*o, "type", "tool_choice", type)) return f;
    if (type != "function")
      return bad_request(cat({"tool_choice of type '", type, "' is not supported (function tools only)"}), "tool_choice");
    out.mode = ToolChoice::Mode::function;
    if (Fail f = required_string(*o, "name", "tool_choice", out.function)) return f;
    if (std::find(names.begin(), names.end(), out.function) == names.end())
      return bad_request(cat({"tool_choice names the function '", out.function, "', which is not in 'tools'"}),
                         "tool_choice");
  } else {
    return type_error("tool_choice", "a string or an object");
  }
  if ((out.mode == ToolChoice::Mode::required) && names.empty())
    return bad_request("tool_choice \"required\" needs 'tools'", "tool_choice");
  return {};
}

Fail text_format(const json::value& text, OutputConstraint& out) {
  const json::object* t = text.if_object();
  if (t == nullptr) return type_error("text", "an object");
  for (const auto& [key, value] : *t) {
    if (value.is_null()) continue;
    if (key == "verbosity") {
      if (value != json::value("medium"))
        return bad_request("'text.verbosity' is not supported (the model's output is what it is)", "text.verbosity");
    } else if (key != "format") {
      return bad_request(cat({"unrecognized field 'text.", key, "'"}), cat({"text.", key}));
    }
  }
  const json::value* format = t->if_contains("format");
  if (format == nullptr || format->is_null()) return {};
  const json::object* f = format->if_object();
  if (f == nullptr) return type_error("text.format", "an object");
  std::string type;
  if (Fail e = required_string(*f, "type", "text.format", type)) return e;
  out = OutputConstraint{};
  out.field = "text.format";
  if (type == "text") return {};
  if (type == "json_object") {
    out.kind = OutputConstraint::Kind::json_object;
    return {};
  }
  if (type != "json_schema")
    return bad_request(cat({"'text.format' type '", type, "' is not one of text, json_object, json_schema"}),
                       "text.format");
  out.kind = OutputConstraint::Kind::json_schema;
  const json::string* name = nullptr;
  if (Fail e = string_member(*f, "name", "text.format.name", name)) return e;
  if (name == nullptr) return bad_request("missing required parameter 'text.format.name'", "text.format.name");
  out.name.assign(name->data(), name->size());
  const json::value* schema = f->if_contains("schema");
  if (schema == nullptr || !(schema->is_object() || schema->is_bool()))  // as chat's response_format takes
    return bad_request("'text.format.schema' must be a JSON Schema (an object or a boolean)", "text.format.schema");
  out.source = json::serialize(*schema);
  out.strict = false;  // OpenAI's default for text.format
  if (const json::value* strict = f->if_contains("strict"); strict && !strict->is_null()) {
    if (!strict->is_bool()) return type_error("text.format.strict", "a boolean");
    out.strict = strict->get_bool();
  }
  return {};
}

void name_tool_results(std::vector<ChatMessage>& messages) {
  std::unordered_map<std::string, std::string> name_of_call;
  for (ChatMessage& m : messages) {
    if (!m.tool_calls_json.empty()) {
      boost::system::error_code ec;
      const json::value calls = json::parse(m.tool_calls_json, ec);
      if (ec || !calls.is_array()) continue;
      for (const json::value& c : calls.get_array()) {
        const json::value* id = c.is_object() ? c.get_object().if_contains("id") : nullptr;
        const json::value* fn = c.is_object() ? c.get_object().if_contains("function") : nullptr;
        const json::value* name = fn && fn->is_object() ? fn->get_object().if_contains("name") : nullptr;
        if (id && id->is_string() && name && name->is_string())
          name_of_call[std::string(id->get_string())] = std::string(name->get_string());
      }
    }
    if (m.role == "tool" && m.name.empty()) {
      if (auto it = name_of_call.find(m.tool_call_id); it != name_of_call.end()) m.name = it->second;
    }
  }
}

}  // namespace conveyor::http::responses
