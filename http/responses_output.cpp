#include "http/responses_output.hpp"

#include "http/api_json.hpp"
#include "http/responses_json.hpp"

namespace conveyor::http {

namespace json = boost::json;

namespace detail {
namespace {

// Echoed settings are compact JSON the parser wrote: they parse.
json::value echoed(const std::string& text) { return json::parse(text); }

template <class T>
json::value or_null(const std::optional<T>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

json::value usage_object(const std::optional<ResponseUsage>& u) {
  if (!u) return nullptr;
  return json::object{{"input_tokens", u->input_tokens},
                      {"input_tokens_details", json::object{{"cached_tokens", u->cached_tokens}}},
                      {"output_tokens", u->output_tokens},
                      {"output_tokens_details", json::object{{"reasoning_tokens", 0}}},
                      {"total_tokens", u->input_tokens + u->output_tokens}};
}

// OpenAI's response error: {"code", "message"}.
json::value error_value(const std::optional<ApiError>& e) {
  if (!e) return nullptr;
  return json::object{{"code", e->code.empty() ? e->type : e->code}, {"message", e->message}};
}

}  // namespace

json::object output_text_part(const std::string& text) {
  return json::object{{"type", "output_text"}, {"text", text}, {"annotations", json::array{}}};
}

json::object output_item_object(const OutputItem& item) {
  if (item.kind == OutputItem::Kind::function_call) {
    return json::object{{"type", "function_call"}, {"id", item.id},          {"call_id", item.call_id},
                        {"name", item.name},       {"arguments", item.arguments}, {"status", item.status}};
  }
  json::array content;
  if (item.status != "in_progress") content.push_back(output_text_part(item.text));
  return json::object{{"type", "message"}, {"id", item.id},          {"role", "assistant"},
                      {"status", item.status}, {"content", std::move(content)}};
}

json::object response_object(const ResponseState& r) {
  const ResponseEcho& e = r.echo;
  json::array output;
  for (const OutputItem& item : r.output) output.push_back(output_item_object(item));
  json::object o{
      {"id", r.id},
      {"object", "response"},
      {"created_at", r.created_at},
      {"status", r.status},
      {"background", false},
      {"error", error_value(r.error)},
      {"incomplete_details",
       r.incomplete_reason.empty() ? json::value(nullptr) : json::value(json::object{{"reason", r.incomplete_reason}})},
      {"instructions", or_null(e.instructions)},
      {"max_output_tokens", or_null(e.max_output_tokens)},
      {"metadata", echoed(e.metadata_json)},
      {"model", r.model},
      {"output", std::move(output)},
      {"parallel_tool_calls", e.parallel_tool_calls},
      {"previous_response_id",
       e.previous_response_id.empty() ? json::value(nullptr) : json::value(e.previous_response_id)},
      {"reasoning", json::object{{"effort", nullptr}, {"summary", nullptr}}},
      {"service_tier", "default"},
      {"store", e.store},
      {"temperature", or_null(e.temperature)},
      {"text", echoed(e.text_json)},
      {"tool_choice", echoed(e.tool_choice_json)},
      {"tools", echoed(e.tools_json)},
      {"top_p", or_null(e.top_p)},
      {"truncation", "disabled"},
      {"usage", usage_object(r.usage)},
  };
  o["user"] = e.user.empty() ? json::value(nullptr) : json::value(e.user);
  return o;
}

}  // namespace detail

std::string response_json(const ResponseState& response) {
  return json::serialize(detail::response_object(response));
}

std::string make_item_id(const char* prefix) { return make_response_id(prefix); }

OutputItem message_item(std::string status, std::string text) {
  OutputItem item;
  item.id = make_item_id("msg_");
  item.status = std::move(status);
  item.text = std::move(text);
  return item;
}

OutputItem function_call_item(std::string call_id, std::string name, std::string arguments, std::string status) {
  OutputItem item;
  item.kind = OutputItem::Kind::function_call;
  item.id = make_item_id("fc_");
  item.status = std::move(status);
  item.call_id = std::move(call_id);
  item.name = std::move(name);
  item.arguments = std::move(arguments);
  return item;
}

}  // namespace conveyor::http
