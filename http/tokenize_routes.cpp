#include "http/tokenize_routes.hpp"

#include <boost/json.hpp>

#include "http/api_request.hpp"
#include "http/json_detail.hpp"
#include "model/tokenizer/utf8.hpp"

namespace conveyor::http {
namespace {

namespace json = boost::json;

// with_pieces' piece, as llama.cpp writes it: the token's text, a special
// token's piece (<s>, <|eot_id|>, which add no bytes to generated text), or
// the byte values of a token that is not whole UTF-8.
json::value piece_json(const Tokenizer& tok, int32_t id) {
  if (tok.is_special(id)) return json::value(tok.piece(id));
  const std::string bytes = tok.token_bytes(id);
  if (utf8::is_valid(bytes)) return json::value(bytes);
  json::array out;
  for (unsigned char c : bytes) out.emplace_back(int(c));
  return out;
}

// The body as a JSON object, or the error.
std::variant<json::object, ApiError> parse_object(std::string_view body) {
  boost::system::error_code ec;
  json::value v = detail::parse_request_json(body, ec);
  if (ec) return detail::body_not_json(ec);
  if (!v.is_object()) return bad_request("the request body must be a JSON object");
  return std::move(v.as_object());
}

std::optional<ApiError> check_model(const json::object& o, const ModelContext& model) {
  const json::value* m = o.if_contains("model");
  if (m == nullptr || m->is_null()) return {};
  if (!m->is_string()) return bad_request("'model' must be a string", "model");
  return check_model_name(std::string_view(m->as_string().data(), m->as_string().size()), model);
}

std::optional<ApiError> get_bool(const json::object& o, std::string_view key, bool& out) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null()) return {};
  if (!v->is_bool()) {
    std::string message = "'";  // piece by piece: g++ 12 warns (falsely) on a chain of +
    message.append(key).append("' must be a boolean");
    return bad_request(std::move(message), std::string(key));
  }
  out = v->as_bool();
  return {};
}

std::optional<ApiError> only_known(const json::object& o, std::initializer_list<std::string_view> known) {
  for (const auto& field : o) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || field.key() == k;
    if (!ok)
      return bad_request("unrecognized request field '" + std::string(field.key()) + "'",
                         std::string(field.key()));
  }
  return {};
}

}  // namespace

std::variant<std::string, ApiError> tokenize_response(std::string_view body, const ModelContext& model) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json::object& o = std::get<json::object>(parsed);
  if (auto e = only_known(o, {"model", "prompt", "content", "add_special_tokens", "add_special",
                              "parse_special", "with_pieces"}))
    return *e;
  if (auto e = check_model(o, model)) return *e;
  const json::value* text = o.if_contains("prompt");
  const char* param = "prompt";
  if (text == nullptr) text = o.if_contains("content"), param = "content";
  if (text == nullptr || !text->is_string())
    return bad_request("'prompt' (or 'content') must be the text to tokenize", param);
  if (!model.tokenizer) return bad_request("the model has no tokenizer", param);
  EncodeOptions options{.add_bos = true, .parse_special = true};
  bool with_pieces = false;
  for (auto [key, field] : {std::pair<std::string_view, bool*>{"add_special_tokens", &options.add_bos},
                            {"add_special", &options.add_bos},
                            {"parse_special", &options.parse_special},
                            {"with_pieces", &with_pieces}})
    if (auto e = get_bool(o, key, *field)) return *e;
  const json::string& s = text->as_string();
  const std::vector<int32_t> ids = model.tokenizer->encode(std::string_view(s.data(), s.size()), options);
  json::array tokens;
  for (int32_t id : ids) {
    if (!with_pieces) {
      tokens.emplace_back(id);
      continue;
    }
    json::object t;
    t["id"] = id;
    t["piece"] = piece_json(*model.tokenizer, id);
    tokens.emplace_back(std::move(t));
  }
  json::object out;
  out["tokens"] = std::move(tokens);
  out["count"] = ids.size();
  out["max_model_len"] = model.config.context_length;
  return json::serialize(out);
}

std::variant<std::string, ApiError> detokenize_response(std::string_view body, const ModelContext& model) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json::object& o = std::get<json::object>(parsed);
  if (auto e = only_known(o, {"model", "tokens"})) return *e;
  if (auto e = check_model(o, model)) return *e;
  const json::value* tokens = o.if_contains("tokens");
  if (tokens == nullptr || !tokens->is_array())
    return bad_request("'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const json::value& t : tokens->as_array()) {
    if (!t.is_int64() || t.as_int64() < 0 || t.as_int64() >= model.config.vocab_size)
      return bad_request("'tokens' must hold token ids in [0, " +
                             std::to_string(model.config.vocab_size) + ")",
                         "tokens");
    ids.push_back(int32_t(t.as_int64()));
  }
  if (!model.tokenizer) return bad_request("the model has no tokenizer", "tokens");
  // Special tokens written out, as llama.cpp and vLLM write them, and the
  // text between them decoded: the result tokenizes back to `ids`
  // (add_special_tokens false, parse_special true).
  const Tokenizer& tok = *model.tokenizer;
  std::string text;
  size_t run = 0;  // the first id not yet written
  for (size_t i = 0; i <= ids.size(); ++i) {
    if (i < ids.size() && !tok.is_special(ids[i])) continue;
    text += tok.decode(std::span(ids).subspan(run, i - run));
    if (i < ids.size()) text += tok.piece(ids[i]);
    run = i + 1;
  }
  json::object out;
  out["prompt"] = text;
  out["content"] = text;
  return json::serialize(out);
}

std::variant<std::string, ApiError> parse_session_release(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json::object& o = std::get<json::object>(parsed);
  if (auto e = only_known(o, {"session_id"})) return *e;
  const json::value* id = o.if_contains("session_id");
  if (id == nullptr || !id->is_string() || id->as_string().empty() || id->as_string().size() > kMaxSessionIdBytes)
    return bad_request("'session_id' must be a non-empty string of at most " + std::to_string(kMaxSessionIdBytes) +
                           " bytes",
                       "session_id");
  return std::string(id->as_string());
}

std::variant<std::string, ApiError> render_response(std::string_view body, const ModelContext& model) {
  ParseResult parsed = parse_api_request(body, Endpoint::render);
  if (parsed.error) return *parsed.error;
  const ApiRequest& r = parsed.request;
  if (auto e = check_model_name(r.model, model)) return *e;
  if (!model.chat) return bad_request("the model has no tokenizer, so no chat template", "messages");
  auto prompt = model.chat->apply(r.messages, {r.tools_json, r.chat_template_kwargs_json, r.add_generation_prompt});
  if (!prompt) return bad_request(prompt.error().message, "messages");
  json::object out;
  out["prompt"] = prompt->text;
  out["prompt_token_ids"] = detail::ids_array(prompt->ids);
  out["count"] = prompt->ids.size();
  out["model"] = model.served_name;
  return json::serialize(out);
}

}  // namespace conveyor::http
