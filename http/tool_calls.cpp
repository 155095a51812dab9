#include "http/tool_calls.hpp"

#include <random>
#include <unordered_set>

#include <boost/json.hpp>

#include "model/tokenizer/tokenizer.hpp"
#include "http/json_detail.hpp"

namespace conveyor::http {

namespace json = boost::json;

const char* to_string(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::llama3_json: return "llama3_json";
    case ToolCallFormat::hermes: return "hermes";
    case ToolCallFormat::mistral: return "mistral";
  }
  return "?";
}

const char* to_string(ToolCallParser parser) {
  switch (parser) {
    case ToolCallParser::automatic: return "auto";
    case ToolCallParser::llama3_json: return "llama3_json";
    case ToolCallParser::hermes: return "hermes";
    case ToolCallParser::mistral: return "mistral";
  }
  return "?";
}

Expected<ToolCallParser> parse_tool_call_parser(std::string_view name) {
  if (name == "auto") return ToolCallParser::automatic;
  if (name == "llama3_json") return ToolCallParser::llama3_json;
  if (name == "hermes") return ToolCallParser::hermes;
  if (name == "mistral") return ToolCallParser::mistral;
  return make_error(Errc::invalid_argument,
                    "unknown tool call parser '" + std::string(name) + "' (auto, llama3_json, hermes or mistral)");
}

ToolCallFormat detect_tool_call_format(std::string_view source) {
  auto has = [source](std::string_view marker) { return source.find(marker) != std::string_view::npos; };
  if (has(kMistralCalls)) return ToolCallFormat::mistral;
  if (has("<tool_call>")) return ToolCallFormat::hermes;
  if (has("<|python_tag|>") || has("ipython") || has("<|start_header_id|>")) return ToolCallFormat::llama3_json;
  return ToolCallFormat::hermes;
}

ToolCallFormat resolve_tool_call_format(ToolCallParser setting, std::string_view template_source) {
  switch (setting) {
    case ToolCallParser::llama3_json: return ToolCallFormat::llama3_json;
    case ToolCallParser::hermes: return ToolCallFormat::hermes;
    case ToolCallParser::mistral: return ToolCallFormat::mistral;
    case ToolCallParser::automatic: break;
  }
  return detect_tool_call_format(template_source);
}

namespace {

// The control token `name` stands for in the vocabulary: one id without bytes.
int32_t control_token(const Tokenizer& tokenizer, std::string_view name) {
  const std::vector<int32_t> ids =
      tokenizer.encode(std::string(name), EncodeOptions{.add_bos = false, .parse_special = true});
  return ids.size() == 1 && tokenizer.token_bytes(ids[0]).empty() ? ids[0] : -1;
}

}  // namespace

std::vector<int32_t> ToolCallSyntax::shown_tokens() const {
  std::vector<int32_t> ids;
  for (int32_t t : {call_token, args_token}) {
    if (t >= 0) ids.push_back(t);
  }
  return ids;
}

ToolCallSyntax tool_call_syntax(ToolCallFormat format, std::string_view template_source, const Tokenizer* tokenizer) {
  ToolCallSyntax s;
  s.format = format;
  if (format != ToolCallFormat::mistral) return s;
  s.named_calls = template_source.find(kMistralArgs) != std::string_view::npos;
  if (tokenizer) {
    s.call_token = control_token(*tokenizer, kMistralCalls);
    if (s.named_calls) s.args_token = control_token(*tokenizer, kMistralArgs);
  }
  return s;
}

namespace {

// As OpenAI: at most 128 tools, names of 1 to 64 letters, digits, '_' or '-'.
constexpr size_t kMaxTools = 128;

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-';
    if (!ok) return false;
  }
  return true;
}

Error tool_error(size_t i, const std::string& what) {
  return make_error(Errc::invalid_argument, "tools[" + std::to_string(i) + "]" + what);
}

Expected<ToolSpec> parse_tool(const json::value& v, size_t i) {
  const json::object* tool = v.if_object();
  if (tool == nullptr) return tool_error(i, " must be an object {\"type\": \"function\", \"function\": {...}}");
  if (const json::value* type = tool->if_contains("type")) {
    if (!type->is_string() || type->get_string() != "function")
      return tool_error(i, ".type must be \"function\" (conveyor implements function tools only)");
  }
  const json::value* fn_value = tool->if_contains("function");
  const json::object* fn = fn_value ? fn_value->if_object() : nullptr;
  if (fn == nullptr) return tool_error(i, ".function must be an object with a name");
  ToolSpec spec;
  const json::value* name = fn->if_contains("name");
  if (name == nullptr || !name->is_string()) return tool_error(i, ".function.name must be a string");
  spec.name = json::value_to<std::string>(*name);
  if (!valid_name(spec.name))
    return tool_error(i, ".function.name '" + spec.name + "' must be 1 to 64 letters, digits, '_' or '-'");
  if (const json::value* d = fn->if_contains("description"); d != nullptr && !d->is_null()) {
    if (!d->is_string()) return tool_error(i, ".function.description must be a string");
    spec.description = json::value_to<std::string>(*d);
  }
  spec.parameters = json::object{{"type", "object"}, {"properties", json::object{}}};
  if (const json::value* p = fn->if_contains("parameters"); p != nullptr && !p->is_null()) {
    const json::object* schema = p->if_object();
    if (schema == nullptr) return tool_error(i, ".function.parameters must be a JSON Schema object");
    if (const json::value* type = schema->if_contains("type");
        type != nullptr && !(type->is_string() && type->get_string() == "object"))
      return tool_error(i, ".function.parameters must describe an object (\"type\": \"object\")");
    spec.parameters = *p;
  }
  if (const json::value* strict = fn->if_contains("strict"); strict != nullptr && !strict->is_null()) {
    if (!strict->is_bool()) return tool_error(i, ".function.strict must be a boolean");
    spec.strict = strict->get_bool();
  }
  return spec;
}

}  // namespace

Expected<std::vector<ToolSpec>> parse_tools(std::string_view tools_json) {
  boost::system::error_code ec;
  const json::value v = detail::parse_request_json(tools_json, ec);
  if (ec) return make_error(Errc::invalid_argument, "tools is not valid JSON: " + detail::json_error_text(ec));
  const json::array* tools = v.if_array();
  if (tools == nullptr) return make_error(Errc::invalid_argument, "tools must be an array of tools");
  if (tools->size() > kMaxTools)
    return make_error(Errc::invalid_argument, "at most " + std::to_string(kMaxTools) + " tools per request");
  std::vector<ToolSpec> out;
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < tools->size(); ++i) {
    auto spec = parse_tool((*tools)[i], i);
    if (!spec) return spec.error();
    if (!names.insert(spec->name).second)
      return tool_error(i, ".function.name '" + spec->name + "' is declared twice");
    out.push_back(std::move(*spec));
  }
  return out;
}

std::string make_tool_call_id(ToolCallFormat format) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const bool mistral = format == ToolCallFormat::mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id.push_back(kAlphabet[rng() % (sizeof kAlphabet - 1)]);
  return id;
}

void append_deltas(const std::vector<ToolCallDelta>& deltas, std::vector<ToolCall>& calls) {
  for (const ToolCallDelta& d : deltas) {
    if (d.first || size_t(d.index) >= calls.size()) {
      calls.resize(size_t(d.index) + 1);
      calls[size_t(d.index)].id = d.id;
      calls[size_t(d.index)].name = d.name;
    }
    calls[size_t(d.index)].arguments += d.arguments;
  }
}

ParsedAnswer parse_tool_calls(ToolCallFormat format, std::string_view text, ToolCallStream::IdMaker make_id,
                              bool cut_short) {
  ToolCallStream stream(format, std::move(make_id));
  ToolCallOutput out;
  stream.feed(text, out);
  stream.finish(out, cut_short);
  ParsedAnswer answer;
  append_deltas(out.calls, answer.calls);
  answer.calls_complete = stream.calls_complete();
  const bool only_space = out.content.find_first_not_of(" \t\r\n") == std::string::npos;
  if (answer.calls.empty() || !only_space) answer.content = std::move(out.content);
  return answer;
}

}  // namespace conveyor::http
