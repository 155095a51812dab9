#include "http/api_request.hpp"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

#include "http/json_detail.hpp"
#include "http/output_constraint_fields.hpp"
#include "http/request_fields.hpp"
#include "http/tool_call_fields.hpp"

namespace conveyor::http {
namespace {

namespace od = simdjson::ondemand;
using Fail = std::optional<ApiError>;

ApiError type_error(std::string_view field, std::string_view want) {
  std::string message = "'";  // appended piece by piece: g++ 12 warns (falsely) on a chain of +
  message.append(field).append("' must be ").append(want);
  return bad_request(std::move(message), std::string(field));
}

ApiError invalid_json(simdjson::error_code err) {
  ApiError e = bad_request(std::string(detail::kBodyNotJson) + simdjson::error_message(err));
  e.code = "invalid_json";
  return e;
}

// The JSON text of a value as sent (consumes the value).
simdjson::error_code raw_json(od::value& v, std::string_view& out) {
  od::json_type t;
  if (auto err = v.type().get(t)) return err;
  if (t == od::json_type::array) {
    od::array a;
    if (auto err = v.get_array().get(a)) return err;
    return a.raw_json().get(out);
  }
  if (t == od::json_type::object) {
    od::object o;
    if (auto err = v.get_object().get(o)) return err;
    return o.raw_json().get(out);
  }
  out = v.raw_json_token();
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n' || out.back() == '\t' ||
                          out.back() == '\r'))
    out.remove_suffix(1);
  return simdjson::SUCCESS;
}

bool is_null(od::value& v) {
  od::json_type t;
  return v.type().get(t) == simdjson::SUCCESS && t == od::json_type::null;
}

Fail get_string(od::value& v, std::string_view field, std::string& out) {
  std::string_view s;
  if (auto err = v.get_string().get(s)) {
    if (err == simdjson::INCORRECT_TYPE) return type_error(field, "a string");
    std::string message = "'";
    message.append(field).append("' is not a valid JSON string (an escape that is no character, such as a lone "
                                 "surrogate \\ud800, or bytes that are not UTF-8)");
    return bad_request(std::move(message), std::string(field));
  }
  out.assign(s);  // the view points into the parser's buffer: copy it out now
  return {};
}

Fail get_bool(od::value& v, std::string_view field, bool& out) {
  if (v.get_bool().get(out)) return type_error(field, "a boolean");
  return {};
}

Fail get_float(od::value& v, std::string_view field, float& out) {
  double d = 0;
  if (v.get_double().get(d)) return type_error(field, "a number");
  out = float(d);
  return {};
}

Fail get_int32(od::value& v, std::string_view field, int32_t& out) {
  int64_t i = 0;
  if (v.get_int64().get(i)) return type_error(field, "an integer");
  if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max())
    return bad_request(std::string(field).append(" is out of range"), std::string(field));
  out = int32_t(i);
  return {};
}

Fail get_token_id(od::value& v, std::vector<int32_t>& out) {
  int64_t id = 0;
  if (v.get_int64().get(id) || id < 0 || id > std::numeric_limits<int32_t>::max())
    return bad_request("prompt token ids must be non-negative integers", "prompt");
  out.push_back(int32_t(id));
  return {};
}

Fail get_id_list(od::value& v, std::vector<int32_t>& out) {
  od::array arr;
  if (v.get_array().get(arr)) return type_error("prompt", "a list of token ids");
  for (auto el : arr) {
    od::value e;
    if (auto err = el.get(e)) return invalid_json(err);
    if (Fail f = get_token_id(e, out)) return f;
  }
  return {};
}

// prompt: "text" | [ids] | ["text", ...] | [[ids], ...] | a mix of the last two.
Fail parse_prompt(od::value& v, std::vector<Prompt>& out) {
  constexpr std::string_view want = "a string, an array of token ids, or an array of those";
  od::json_type t;
  if (v.type().get(t)) return type_error("prompt", want);
  if (t == od::json_type::string) {
    out.emplace_back();
    out.back().text.emplace();
    return get_string(v, "prompt", *out.back().text);
  }
  if (t != od::json_type::array) return type_error("prompt", want);
  od::array arr;
  if (v.get_array().get(arr)) return type_error("prompt", want);
  bool flat_ids = false;
  for (auto el : arr) {
    od::value e;
    if (auto err = el.get(e)) return invalid_json(err);
    od::json_type et;
    if (e.type().get(et)) return type_error("prompt", want);
    if (et == od::json_type::number) {
      if (!out.empty() && !flat_ids) return type_error("prompt", want);
      if (out.empty()) out.emplace_back();
      flat_ids = true;
      if (Fail f = get_token_id(e, out.back().ids)) return f;
      continue;
    }
    if (flat_ids || out.size() >= kMaxPrompts) {
      if (flat_ids) return type_error("prompt", want);
      return bad_request("at most " + std::to_string(kMaxPrompts) + " prompts per request", "prompt");
    }
    out.emplace_back();
    if (et == od::json_type::string) {
      out.back().text.emplace();
      if (Fail f = get_string(e, "prompt", *out.back().text)) return f;
    } else if (et == od::json_type::array) {
      if (Fail f = get_id_list(e, out.back().ids)) return f;
    } else {
      return type_error("prompt", want);
    }
  }
  if (out.empty()) return bad_request("'prompt' must not be empty", "prompt");
  return {};
}

// content: "text" | [{"type": "text", "text": "..."}, ...] | null. Text
// parts are joined by newlines, as vLLM and llama.cpp join them.
Fail parse_content(od::value& v, std::string& out) {
  constexpr std::string_view want = "a string or an array of text parts";
  od::json_type t;
  if (v.type().get(t)) return type_error("content", want);
  if (t == od::json_type::null) return {};
  if (t == od::json_type::string) return get_string(v, "content", out);
  od::array parts;
  if (v.get_array().get(parts)) return type_error("content", want);
  bool first = true;
  for (auto part : parts) {
    od::object p;
    if (part.get_object().get(p)) return type_error("content", want);
    for (auto field : p) {
      std::string_view key;
      if (auto err = field.unescaped_key().get(key)) return invalid_json(err);
      od::value value;
      if (auto err = field.value().get(value)) return invalid_json(err);
      std::string piece;
      if (key == "type") {
        if (Fail f = get_string(value, "content", piece)) return f;
        if (piece != "text")
          return bad_request("content parts of type '" + piece + "' are not supported (text only)",
                             "messages");
      } else if (key == "text") {
        if (Fail f = get_string(value, "content", piece)) return f;
        if (!std::exchange(first, false)) out += '\n';
        out += piece;
      }
    }
  }
  return {};
}

// Keeps the array's JSON as sent and reads from it what reaches the chat
// template: role, content, and the tool fields (tool_calls, tool_call_id, name).
Fail parse_messages(od::value& v, ApiRequest& r) {
  std::string_view raw;
  if (raw_json(v, raw)) return type_error("messages", "an array of messages");
  r.messages_json.assign(raw);
  thread_local od::parser parser;
  const simdjson::padded_string padded(r.messages_json);
  od::document doc;
  if (auto err = parser.iterate(padded).get(doc)) return invalid_json(err);
  std::vector<ChatMessage>& out = r.messages;
  od::array arr;
  if (doc.get_array().get(arr)) return type_error("messages", "an array of messages");
  for (auto el : arr) {
    od::object m;
    if (el.get_object().get(m)) return type_error("messages", "an array of objects");
    ChatMessage msg;
    bool has_content = false;
    for (auto field : m) {
      std::string_view key;
      if (auto err = field.unescaped_key().get(key)) return invalid_json(err);
      od::value value;
      if (auto err = field.value().get(value)) return invalid_json(err);
      if (key == "role") {
        if (Fail f = get_string(value, "role", msg.role)) return f;
      } else if (key == "content") {
        has_content = !is_null(value);
        if (Fail f = parse_content(value, msg.content)) return f;
      } else if (key == "tool_calls" && !is_null(value)) {
        std::string_view raw;
        if (raw_json(value, raw)) return type_error("tool_calls", "an array of tool calls");
        if (Fail f = parse_message_tool_calls(raw, msg.tool_calls_json)) return f;
      } else if (key == "tool_call_id" && !is_null(value)) {
        if (Fail f = get_string(value, "tool_call_id", msg.tool_call_id)) return f;
      } else if (key == "name" && !is_null(value)) {
        if (Fail f = get_string(value, "name", msg.name)) return f;
      } else if (key == "reasoning_content" && !is_null(value)) {
        if (Fail f = get_string(value, "reasoning_content", msg.reasoning_content)) return f;
      }
    }
    if (msg.role.empty()) return bad_request("every message needs a 'role'", "messages");
    // OpenAI's roles; developer is the newer models' system (templates know
    // system). Any other role a template would drop or mislabel.
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      return bad_request("messages[" + std::to_string(out.size()) + "]: role '" + msg.role +
                             "' is not one of system, developer, user, assistant, tool",
                         "messages");
    // As OpenAI's API: only an assistant's turn may go without content
    // (its tool calls, or a reply being continued, stand for it).
    if (!has_content && msg.role != "assistant")
      return bad_request("messages[" + std::to_string(out.size()) + "]: a " + msg.role +
                             " message needs 'content' (a string or an array of text parts)",
                         "messages");
    out.push_back(std::move(msg));
  }
  if (out.empty()) return bad_request("'messages' must not be empty", "messages");
  return {};
}

Fail parse_stop(od::value& v, std::vector<std::string>& out) {
  od::json_type t;
  if (v.type().get(t)) return type_error("stop", "a string or an array of strings");
  if (t == od::json_type::string) {
    out.emplace_back();
    return get_string(v, "stop", out.back());
  }
  od::array arr;
  if (v.get_array().get(arr)) return type_error("stop", "a string or an array of strings");
  for (auto el : arr) {
    od::value e;
    if (auto err = el.get(e)) return invalid_json(err);
    out.emplace_back();
    if (Fail f = get_string(e, "stop", out.back())) return f;
  }
  if (out.size() > kMaxStopStrings)
    return bad_request("at most " + std::to_string(kMaxStopStrings) + " stop strings", "stop");
  return {};
}

// vLLM's stop_token_ids: an array of token ids (checked against the
// vocabulary with the other sampling fields).
Fail parse_stop_token_ids(od::value& v, std::vector<int32_t>& out) {
  constexpr size_t kMaxStopTokenIds = 64;
  od::array arr;
  if (v.get_array().get(arr)) return type_error("stop_token_ids", "an array of token ids");
  out.clear();
  for (auto el : arr) {
    if (out.size() == kMaxStopTokenIds)
      return bad_request("at most " + std::to_string(kMaxStopTokenIds) + " stop_token_ids", "stop_token_ids");
    od::value id;
    if (auto err = el.get(id)) return invalid_json(err);
    int32_t token = 0;
    if (Fail f = get_int32(id, "stop_token_ids", token)) return f;
    out.push_back(token);
  }
  return {};
}

Fail parse_stream_options(od::value& v, bool& include_usage) {
  od::object obj;
  if (v.get_object().get(obj)) return type_error("stream_options", "an object");
  for (auto field : obj) {
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) return invalid_json(err);
    od::value value;
      if (auto err = field.value().get(value)) return invalid_json(err);
    if (key == "include_usage" && !is_null(value)) {
      if (Fail f = get_bool(value, "stream_options.include_usage", include_usage)) return f;
    }
  }
  return {};
}

// {"50256": -100, ...}: sorted by token, each token once (a key given twice:
// the last value).
Fail parse_logit_bias(od::value& v, std::vector<LogitBias>& out) {
  od::object obj;
  if (v.get_object().get(obj)) return type_error("logit_bias", "an object of token ids to biases");
  out.clear();
  for (auto field : obj) {
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) return invalid_json(err);
    int32_t token = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), token);
    if (key.empty() || ec != std::errc() || end != key.data() + key.size() || token < 0)
      return bad_request("logit_bias keys must be token ids, got '" + std::string(key) + "'", "logit_bias");
    od::value value;
    if (auto err = field.value().get(value)) return invalid_json(err);
    float bias = 0.0f;
    if (Fail f = get_float(value, "logit_bias", bias)) return f;
    out.push_back(LogitBias{token, bias});
  }
  std::stable_sort(out.begin(), out.end(), [](const LogitBias& a, const LogitBias& b) { return a.token < b.token; });
  // A token given twice keeps its last value, as a JSON object's reader would.
  std::vector<LogitBias> unique;
  for (const LogitBias& b : out) {
    if (!unique.empty() && unique.back().token == b.token) unique.back() = b;
    else unique.push_back(b);
  }
  out = std::move(unique);
  return {};
}

Fail parse_client_id(od::value& v, ApiRequest& r) {
  od::json_type t;
  if (v.type().get(t)) return type_error("id", "a string or an integer");
  if (t == od::json_type::string) {
    r.client_id_is_number = false;  // {"id": 5, "id": "x"}: the last one, with its own kind
    return get_string(v, "id", r.client_id);
  }
  int64_t n = 0;
  if (v.get_int64().get(n)) return type_error("id", "a string or an integer");
  r.client_id = std::to_string(n);
  r.client_id_is_number = true;
  return {};
}

// Fields whose meaning depends on others, resolved after the loop.
struct Pending {
  std::optional<int32_t> max_tokens, max_completion_tokens, logprobs_count, top_logprobs, prompt_logprobs;
  std::optional<bool> logprobs_flag;
  bool has_prompt = false, has_messages = false, has_id = false;
  std::string type;
};

Fail parse_logprobs(od::value& v, Pending& p) {
  od::json_type t;
  if (v.type().get(t)) return type_error("logprobs", "a boolean or an integer");
  if (t == od::json_type::boolean) {
    p.logprobs_flag.emplace();
    return get_bool(v, "logprobs", *p.logprobs_flag);
  }
  p.logprobs_count.emplace();
  return get_int32(v, "logprobs", *p.logprobs_count);
}

// A field that apply_field does not handle: in the table as refused (400,
// unless its value asks for nothing), or not in the table at all.
Fail refused_field(std::string_view key, od::value& v, uint8_t scope) {
  const RequestField* f = find_request_field(key, scope);
  std::string field(key);
  if (f == nullptr)
    return bad_request("unrecognized request field '" + field + "'", field);
  std::string_view raw;
  if (raw_json(v, raw)) return type_error(key, "valid JSON");
  std::string compact;  // harmless values hold no spaces inside strings
  for (char c : raw)
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') compact.push_back(c);
  if (is_harmless(*f, compact)) return {};
  return bad_request("'" + field + "' is not supported: " + std::string(f->note), field);
}

Fail apply_field(std::string_view key, od::value& v, ApiRequest& r, Pending& p, uint8_t scope) {
  SamplingParams& s = r.sampling;
  if (key == "prompt") {
    if (!(scope & kCompletions))
      return bad_request("'prompt' belongs to /v1/completions; a chat request sends 'messages'", "prompt");
    p.has_prompt = true;
    return parse_prompt(v, r.prompts);
  }
  if (key == "messages") {
    if (!(scope & (kChat | kRender)))
      return bad_request("'messages' belongs to /v1/chat/completions; a completion sends 'prompt'", "messages");
    p.has_messages = true;
    return parse_messages(v, r);
  }
  if (key == "tools" && (scope & (kChat | kRender))) {
    std::string_view raw;
    if (raw_json(v, raw) || !raw.starts_with('[')) return type_error(key, "an array of tools");
    return parse_tools_field(raw, r);
  }
  if (key == "chat_template_kwargs" && (scope & (kChat | kRender))) {
    std::string_view raw;
    if (raw_json(v, raw) || !raw.starts_with('{')) return type_error(key, "an object of template variables");
    r.chat_template_kwargs_json.assign(raw);
    return {};
  }
  if (key == "tool_choice" && (scope & kChat)) {
    std::string_view raw;
    if (raw_json(v, raw)) return type_error(key, "valid JSON");
    return parse_tool_choice_field(raw, r.tool_choice);
  }
  if (key == "parallel_tool_calls" && (scope & kChat)) return get_bool(v, key, r.parallel_tool_calls);
  if (key == "response_format" || key == "structured_outputs" || key == "json_schema" || key == "grammar") {
    std::string_view raw;
    if (raw_json(v, raw)) return type_error(key, "valid JSON");
    if (key == "response_format") return parse_response_format(raw, r.constraint);
    if (key == "structured_outputs") return parse_structured_outputs(raw, r.constraint);
    if (key == "json_schema") return parse_json_schema_field(raw, r.constraint);
    return parse_grammar_field(raw, r.constraint);
  }
  if (key == "model") return get_string(v, "model", r.model);
  if (key == "max_tokens") return get_int32(v, key, p.max_tokens.emplace());
  if (key == "max_completion_tokens") return get_int32(v, key, p.max_completion_tokens.emplace());
  if (key == "temperature") return get_float(v, key, s.temperature);
  if (key == "top_p") return get_float(v, key, s.top_p);
  if (key == "top_k") return get_int32(v, key, s.top_k);
  if (key == "min_p") return get_float(v, key, s.min_p);
  if (key == "presence_penalty") return get_float(v, key, s.presence_penalty);
  if (key == "frequency_penalty") return get_float(v, key, s.frequency_penalty);
  if (key == "repetition_penalty") return get_float(v, key, s.repetition_penalty);
  if (key == "seed") {  // any 64-bit integer, signed or not (a negative one wraps)
    od::number n;
    if (v.get_number().get(n) || !(n.is_int64() || n.is_uint64())) return type_error(key, "an integer");
    s.seed = n.is_int64() ? uint64_t(n.get_int64()) : n.get_uint64();
    s.has_seed = true;
    return {};
  }
  if (key == "stop") return parse_stop(v, r.stop);
  if (key == "stop_token_ids") return parse_stop_token_ids(v, s.stop_token_ids);
  if (key == "logit_bias") return parse_logit_bias(v, s.logit_bias);
  if (key == "n") return get_int32(v, key, r.n);
  if (key == "logprobs") {
    if (scope == kChat) {  // chat's is a flag; top_logprobs is the count
      p.logprobs_flag.emplace();
      return get_bool(v, "logprobs", *p.logprobs_flag);
    }
    return parse_logprobs(v, p);
  }
  if (key == "top_logprobs") return get_int32(v, key, p.top_logprobs.emplace());
  if (key == "stream") return get_bool(v, key, r.stream);
  if (key == "stream_options") return parse_stream_options(v, r.include_usage);
  if (key == "user") return get_string(v, key, r.user);
  if (key == "session_id") return get_string(v, key, r.session_id);
  if (key == "ignore_eos") return get_bool(v, key, s.ignore_eos);
  if (key == "priority") return get_int32(v, key, r.priority);
  if (key == "return_token_ids") return get_bool(v, key, r.return_token_ids);
  if (key == "echo" && (scope & kCompletions)) return get_bool(v, key, r.echo);
  if (key == "prompt_logprobs" && (scope & (kCompletions | kChat)))
    return get_int32(v, key, p.prompt_logprobs.emplace());
  if (key == "id") {
    p.has_id = true;
    return parse_client_id(v, r);
  }
  if (key == "type") return get_string(v, key, p.type);
  if (key == "add_special_tokens") return get_bool(v, key, r.add_special_tokens);
  if (key == "parse_special") return get_bool(v, key, r.parse_special);
  if (key == "add_generation_prompt") return get_bool(v, key, r.add_generation_prompt);
  if (key == "prompt_cache_key" || key == "safety_identifier") {
    std::string ignored;
    return get_string(v, key, ignored);
  }
  return refused_field(key, v, scope);
}

// vLLM's rules: 0..20 here (vLLM's -1, the whole vocabulary, is refused),
// and none in a stream, whose chunks have no place for them (0 asks for
// nothing there and is accepted); a WebSocket request streams too.
Fail resolve_prompt_logprobs(ApiRequest& r, const Pending& p, Endpoint endpoint) {
  if (!p.prompt_logprobs) return {};
  const int32_t k = *p.prompt_logprobs;
  if (k < 0 || k > kMaxLogprobs)
    return bad_request("'prompt_logprobs' must be between 0 and " + std::to_string(kMaxLogprobs) +
                           (k == -1 ? " (-1, the whole vocabulary, is not supported)" : ""),
                       "prompt_logprobs");
  const bool streamed = r.stream || endpoint == Endpoint::websocket;
  if (streamed && k > 0)
    return bad_request("'prompt_logprobs' is not available when streaming (stream: true or the WebSocket)",
                       "prompt_logprobs");
  r.prompt_logprobs = streamed ? -1 : k;
  return {};
}

Fail resolve(ApiRequest& r, Pending& p, Endpoint endpoint) {
  if (endpoint == Endpoint::websocket) {
    if (!p.has_id) return bad_request("every message needs an 'id'", "id");
    // Events name a request by its id; "" would read as the null id of
    // messages that could not be read.
    if (r.client_id.empty()) return bad_request("'id' must not be empty", "id");
    if (p.type == "cancel") {
      r.cancel = true;
      return {};
    }
    if (!p.type.empty() && p.type != "completion" && p.type != "chat")
      return bad_request("'type' must be \"completion\", \"chat\" or \"cancel\"", "type");
    if (p.has_prompt == p.has_messages)
      return bad_request("a request needs either 'prompt' or 'messages'");
    r.chat = p.has_messages;
  } else if (endpoint == Endpoint::render) {
    r.chat = true;
    if (!p.has_messages) return bad_request("'messages' is required", "messages");
    return {};
  } else {
    r.chat = endpoint == Endpoint::chat;
    if (r.chat && !p.has_messages) return bad_request("'messages' is required", "messages");
    if (!r.chat && !p.has_prompt) return bad_request("'prompt' is required", "prompt");
  }
  if (Fail f = check_tool_fields(r)) return f;
  if (p.max_completion_tokens) p.max_tokens = p.max_completion_tokens;
  if (p.max_tokens) {
    r.sampling.max_tokens = *p.max_tokens;
    r.max_tokens_given = true;
  }
  if (r.sampling.top_k < -1)
    return bad_request("'top_k' must be -1 or 0 (off) or a positive count, got " + std::to_string(r.sampling.top_k),
                       "top_k");
  if (r.sampling.top_k < 0) r.sampling.top_k = 0;  // -1 means off, as in vLLM
  // Chat: logprobs (bool) + top_logprobs (count); completions: logprobs (count).
  int32_t logprobs = -1;
  if (p.logprobs_flag) {
    if (*p.logprobs_flag) logprobs = p.top_logprobs.value_or(0);
  } else if (p.logprobs_count) {
    logprobs = *p.logprobs_count;
  }
  if (p.top_logprobs && !p.logprobs_flag && !p.logprobs_count && r.chat)
    return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  for (const auto& [count, name] : {std::pair{p.top_logprobs, "top_logprobs"}, {p.logprobs_count, "logprobs"}}) {
    if (count && (*count < 0 || *count > kMaxLogprobs))
      return bad_request("'" + std::string(name) + "' must be between 0 and " + std::to_string(kMaxLogprobs) +
                             ", got " + std::to_string(*count),
                         name);
  }
  r.sampling.logprobs = logprobs;
  if (Fail f = resolve_prompt_logprobs(r, p, endpoint)) return f;
  if (r.echo && r.chat) return bad_request("'echo' applies to completions (a prompt), not to chat", "echo");
  if (!r.stream) r.include_usage = false;
  return {};
}

ParseResult parse_request(std::string_view body, Endpoint endpoint) {
  thread_local od::parser parser;
  ParseResult result;
  const simdjson::padded_string padded(body);
  od::document doc;
  if (auto err = parser.iterate(padded).get(doc)) {
    result.error = invalid_json(err);
    return result;
  }
  od::object obj;
  if (auto err = doc.get_object().get(obj)) {
    result.error = err == simdjson::INCORRECT_TYPE ? bad_request("the request body must be a JSON object")
                                                   : invalid_json(err);
    return result;
  }
  Pending pending;
  for (auto field_result : obj) {
    od::field field;
    if (auto err = std::move(field_result).get(field)) {
      result.error = invalid_json(err);
      return result;
    }
    std::string_view key;
    if (auto err = field.unescaped_key().get(key)) {
      result.error = invalid_json(err);
      return result;
    }
    od::value value = field.value();
    if (is_null(value)) continue;
    if (Fail f = apply_field(key, value, result.request, pending, scope_of(endpoint))) {
      result.error = std::move(f);
      return result;
    }
  }
  // On-demand parsing stops at the object's end: anything after it is an error.
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) == simdjson::SUCCESS) {
    result.error = bad_request(std::string(detail::kBodyNotJson).append("content after the object"));
    return result;
  }
  if (Fail f = resolve(result.request, pending, endpoint)) result.error = std::move(f);
  return result;
}

}  // namespace

// simdjson's on-demand errors say where reading stopped ("ended early in the
// middle of an object" for content after it): a body found not to be JSON
// is read again by Boost, whose message names what is wrong with it.
ParseResult parse_api_request(std::string_view body, Endpoint endpoint) {
  ParseResult result = parse_request(body, endpoint);
  if (result.error && result.error->code == "invalid_json") {
    boost::system::error_code ec;
    detail::parse_request_json(body, ec);
    if (ec) result.error->message = detail::body_not_json(ec).message;
  }
  return result;
}

}  // namespace conveyor::http
