#include "http/responses_request.hpp"

#include <boost/json.hpp>
#include <limits>

#include "http/api_request.hpp"
#include "http/responses_input.hpp"
#include "http/json_detail.hpp"

namespace conveyor::http {
namespace {

namespace json = boost::json;
using responses::Fail;

constexpr FieldSupport I = FieldSupport::implemented;
constexpr FieldSupport R = FieldSupport::refused;

// POST /v1/responses's body fields in OpenAI's API reference (2026), and
// conveyor's sampling extensions.
constexpr RequestField kFields[] = {
    {"model", 0, I, "", "must name the served model (404 model_not_found otherwise)"},
    {"input", 0, I, "", "a string, or message, function_call and function_call_output items"},
    {"instructions", 0, I, "", "a system message in front of the conversation (not carried over)"},
    {"previous_response_id", 0, I, "",
     "continues a stored response's conversation; its KV is kept by an engine session"},
    {"store", 0, I, "", "keep the response for GET, DELETE and previous_response_id (default true)"},
    {"stream", 0, I, "", "server-sent events: response.created, response.output_text.delta, ..."},
    {"stream_options", 0, I, "", "accepted; include_obfuscation adds nothing (no obfuscation padding)"},
    {"metadata", 0, I, "", "up to 16 string pairs, stored with the response"},
    {"user", 0, I, "", "kept with the response"},
    {"safety_identifier", 0, I, "", "accepted, as user"},
    {"prompt_cache_key", 0, I, "", "accepted; prefix caching is automatic"},
    {"temperature", 0, I, "", "sampling temperature; 0 is greedy"},
    {"top_p", 0, I, "", "nucleus sampling"},
    {"max_output_tokens", 0, I, "", "tokens to generate at most; past it the response is incomplete"},
    {"parallel_tool_calls", 0, I, "", "more than one function call in a turn"},
    {"tools", 0, I, "", "function tools only"},
    {"tool_choice", 0, I, "", "none, auto, required or a function"},
    {"text", 0, I, "", "format: text, json_object or json_schema (structured outputs)"},
    {"truncation", 0, R, "\"disabled\"", "conversations are never truncated: a prompt past the context is a 400"},
    {"background", 0, R, "false", "background responses are not implemented"},
    {"include", 0, R, "[]", "no extra output data is available"},
    {"reasoning", 0, R, "{}|{\"effort\":null}|{\"effort\":null,\"summary\":null}",
     "reasoning settings are not implemented"},
    {"service_tier", 0, R, "\"auto\"|\"default\"", "conveyor has one service tier"},
    {"top_logprobs", 0, R, "0", "log probabilities are not implemented on the Responses API"},
    {"max_tool_calls", 0, R, "", "a limit on tool calls is not implemented"},
    {"prompt", 0, R, "", "stored prompt templates are not implemented; send 'input'"},
    {"conversation", 0, R, "", "conversation objects are not implemented; use previous_response_id"},
    // Extensions (the names of conveyor's chat endpoint).
    {"top_k", 0, I, "", "keep the k most likely tokens; 0 or -1 is off"},
    {"min_p", 0, I, "", "drop tokens below min_p times the most likely one's probability"},
    {"seed", 0, I, "", "seeds the generator"},
    {"presence_penalty", 0, I, "", "OpenAI's presence penalty"},
    {"frequency_penalty", 0, I, "", "OpenAI's frequency penalty"},
    {"repetition_penalty", 0, I, "", "divide the logits of tokens already seen"},
    {"stop", 0, I, "", "up to 16 stop strings, removed from the output"},
    {"ignore_eos", 0, I, "", "keep generating past end-of-sequence tokens"},
    {"priority", 0, I, "", "lower runs sooner (vLLM); needs --scheduling-policy priority"},
};

using responses::type_error;

Fail get_string(const json::value& v, std::string_view field, std::string& out) {
  const json::string* s = v.if_string();
  if (s == nullptr) return type_error(field, "a string");
  out.assign(s->data(), s->size());
  return {};
}

Fail get_bool(const json::value& v, std::string_view field, bool& out) {
  if (!v.is_bool()) return type_error(field, "a boolean");
  out = v.get_bool();
  return {};
}

Fail get_number(const json::value& v, std::string_view field, double& out) {
  if (v.is_double()) out = v.get_double();
  else if (v.is_int64()) out = double(v.get_int64());
  else if (v.is_uint64()) out = double(v.get_uint64());
  else return type_error(field, "a number");
  return {};
}

Fail get_float(const json::value& v, std::string_view field, float& out) {
  double d = 0;
  if (Fail f = get_number(v, field, d)) return f;
  out = float(d);
  return {};
}

Fail get_int32(const json::value& v, std::string_view field, int32_t& out) {
  if (!v.is_int64() || v.get_int64() < std::numeric_limits<int32_t>::min() ||
      v.get_int64() > std::numeric_limits<int32_t>::max())
    return type_error(field, "an integer");
  out = int32_t(v.get_int64());
  return {};
}

Fail get_stop(const json::value& v, std::vector<std::string>& out) {
  if (v.is_string()) {
    out.emplace_back(v.get_string());
    return {};
  }
  if (!v.is_array()) return type_error("stop", "a string or an array of strings");
  for (const json::value& s : v.get_array()) {
    if (!s.is_string()) return type_error("stop", "a string or an array of strings");
    out.emplace_back(s.get_string());
  }
  if (out.size() > kMaxStopStrings)
    return bad_request("at most " + std::to_string(kMaxStopStrings) + " stop strings", "stop");
  return {};
}

// OpenAI's limits: 16 pairs, keys up to 64 characters, values up to 512.
Fail get_metadata(const json::value& v, std::string& out) {
  const json::object* o = v.if_object();
  if (o == nullptr) return type_error("metadata", "an object of strings");
  if (o->size() > kMaxMetadataPairs)
    return bad_request("'metadata' holds at most " + std::to_string(kMaxMetadataPairs) + " pairs", "metadata");
  for (const auto& [key, value] : *o) {
    if (!value.is_string()) return type_error("metadata", "an object of strings");
    if (key.size() > 64 || value.get_string().size() > 512)
      return bad_request("'metadata' keys are at most 64 characters and values at most 512", "metadata");
  }
  out = json::serialize(v);
  return {};
}

// A field the table refuses: 400 naming it, unless its value asks for nothing.
Fail refused(std::string_view key, const json::value& v) {
  const RequestField* row = nullptr;
  for (const RequestField& f : kFields)
    if (f.name == key) row = &f;
  const std::string field(key);
  if (row == nullptr) return bad_request("unrecognized request field '" + field + "'", field);
  if (is_harmless(*row, json::serialize(v))) return {};
  return bad_request("'" + field + "' is not supported: " + std::string(row->note), field);
}

// What depends on other fields, resolved after all are read.
struct Pending {
  const json::value* input = nullptr;
  const json::value* tools = nullptr;
  const json::value* tool_choice = nullptr;
  const json::value* text = nullptr;
};

Fail apply_field(std::string_view key, const json::value& v, ResponsesRequest& out, Pending& p) {
  ApiRequest& r = out.chat;
  ResponseEcho& echo = out.echo;
  SamplingParams& s = r.sampling;
  if (key == "input") return p.input = &v, Fail{};
  if (key == "tools") return p.tools = &v, Fail{};
  if (key == "tool_choice") return p.tool_choice = &v, Fail{};
  if (key == "text") return p.text = &v, Fail{};
  if (key == "model") return get_string(v, key, r.model);
  if (key == "instructions") return get_string(v, key, out.instructions.emplace());
  if (key == "previous_response_id") return get_string(v, key, out.previous_response_id);
  if (key == "store") return get_bool(v, key, echo.store);
  if (key == "stream") return get_bool(v, key, r.stream);
  if (key == "stream_options") return v.is_object() ? Fail{} : type_error(key, "an object");
  if (key == "metadata") return get_metadata(v, echo.metadata_json);
  if (key == "user") return get_string(v, key, r.user);
  if (key == "safety_identifier" || key == "prompt_cache_key") {
    std::string ignored;
    return get_string(v, key, ignored);
  }
  // Echoed as sent (the float the sampler takes would show 0.7 as 0.699999988).
  if (key == "temperature") {
    if (Fail f = get_number(v, key, echo.temperature.emplace())) return f;
    s.temperature = float(*echo.temperature);
    return {};
  }
  if (key == "top_p") {
    if (Fail f = get_number(v, key, echo.top_p.emplace())) return f;
    s.top_p = float(*echo.top_p);
    return {};
  }
  if (key == "max_output_tokens") {
    int32_t n = 0;
    if (Fail f = get_int32(v, key, n)) return f;
    if (n < 1) return bad_request("'max_output_tokens' must be at least 1", "max_output_tokens");
    s.max_tokens = n;
    r.max_tokens_given = true;
    echo.max_output_tokens = n;
    return {};
  }
  if (key == "parallel_tool_calls") {
    if (Fail f = get_bool(v, key, r.parallel_tool_calls)) return f;
    echo.parallel_tool_calls = r.parallel_tool_calls;
    return {};
  }
  if (key == "top_k") return get_int32(v, key, s.top_k);
  if (key == "min_p") return get_float(v, key, s.min_p);
  if (key == "presence_penalty") return get_float(v, key, s.presence_penalty);
  if (key == "frequency_penalty") return get_float(v, key, s.frequency_penalty);
  if (key == "repetition_penalty") return get_float(v, key, s.repetition_penalty);
  if (key == "seed") {
    if (!v.is_int64() && !v.is_uint64()) return type_error(key, "an integer");
    s.seed = v.is_int64() ? uint64_t(v.get_int64()) : v.get_uint64();
    s.has_seed = true;
    return {};
  }
  if (key == "stop") return get_stop(v, r.stop);
  if (key == "ignore_eos") return get_bool(v, key, s.ignore_eos);
  if (key == "priority") return get_int32(v, key, r.priority);
  return refused(key, v);
}

Fail resolve(ResponsesRequest& out, const Pending& p) {
  ApiRequest& r = out.chat;
  if (p.input == nullptr) return bad_request("'input' is required", "input");
  if (Fail f = responses::input_messages(*p.input, r.messages)) return f;
  out.input_items_json = json::serialize(responses::input_items(*p.input));
  std::vector<std::string> names;
  if (p.tools) {
    if (Fail f = responses::chat_tools(*p.tools, r.tools_json, names)) return f;
    out.echo.tools_json = json::serialize(*p.tools);
  }
  if (p.tool_choice) {
    if (Fail f = responses::tool_choice(*p.tool_choice, names, r.tool_choice)) return f;
    out.echo.tool_choice_json = json::serialize(*p.tool_choice);
  }
  if (p.text) {
    if (Fail f = responses::text_format(*p.text, r.constraint)) return f;
    if (const json::value* format = p.text->get_object().if_contains("format"); format && !format->is_null())
      out.echo.text_json = json::serialize(json::object{{"format", *format}});
  }
  if (r.sampling.top_k < 0) r.sampling.top_k = 0;  // -1 means off, as in vLLM
  r.chat = true;
  r.n = 1;
  out.echo.instructions = out.instructions;
  out.echo.previous_response_id = out.previous_response_id;
  out.echo.user = r.user;
  return {};
}

}  // namespace

std::span<const RequestField> responses_fields() { return kFields; }

std::variant<ResponsesRequest, ApiError> parse_responses_request(std::string_view body) {
  boost::system::error_code ec;
  const json::value doc = detail::parse_request_json(body, ec);
  if (ec) return detail::body_not_json(ec);
  const json::object* obj = doc.if_object();
  if (obj == nullptr) return bad_request("the request body must be a JSON object");
  ResponsesRequest out;
  Pending pending;
  for (const auto& [key, value] : *obj) {
    if (value.is_null()) continue;  // null counts as absent
    if (Fail f = apply_field(key, value, out, pending)) return *f;
  }
  if (Fail f = resolve(out, pending)) return *f;
  return out;
}

}  // namespace conveyor::http
