#include "http/api_json.hpp"

#include <chrono>
#include <cstdio>
#include <random>

#include "http/json_detail.hpp"
#include "model/tokenizer/utf8.hpp"

namespace conveyor::http {

namespace json = boost::json;

namespace detail {

json::object error_object(const ApiError& error) {
  json::object inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param.empty() ? json::value(nullptr) : json::value(error.param);
  inner["code"] = error.code.empty() ? json::value(nullptr) : json::value(error.code);
  json::object outer;
  outer["error"] = std::move(inner);
  return outer;
}

json::value client_id_value(const std::string& id, bool is_number) {
  if (is_number) return json::value(std::stoll(id));
  if (id.empty()) return json::value(nullptr);
  return json::value(id);
}

json::array ids_array(std::span<const int32_t> ids) {
  json::array out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.emplace_back(id);
  return out;
}

std::string token_bytes(const Tokenizer* tokenizer, int32_t id) {
  return tokenizer ? tokenizer->token_bytes(id) : std::string();
}

std::string token_text(const Tokenizer* tokenizer, int32_t id) {
  if (!tokenizer) return "token_id:" + std::to_string(id);
  const std::string bytes = tokenizer->token_bytes(id);
  if (utf8::is_valid(bytes)) return bytes;
  std::string out = "bytes:";
  for (unsigned char c : bytes) {
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    out += hex;
  }
  return out;
}

json::value parse_request_json(std::string_view text, boost::system::error_code& ec) {
  json::parse_options options;
  options.max_depth = kMaxJsonDepth;
  return json::parse(text, ec, {}, options);
}

std::string json_error_text(const boost::system::error_code& ec) {
  if (ec == json::error::too_deep) return "nested more than " + std::to_string(kMaxJsonDepth) + " levels deep";
  return ec.message();
}

}  // namespace detail

std::string error_json(const ApiError& error) { return json::serialize(detail::error_object(error)); }

std::string ws_error_json(const ApiError& error, const std::string& client_id, bool id_is_number) {
  json::object event = detail::error_object(error);
  event["type"] = "error";
  event["id"] = detail::client_id_value(client_id, id_is_number);
  return json::serialize(event);
}

std::string models_json(const std::string& served_name, int64_t created, int32_t context_length) {
  json::object model;
  model["id"] = served_name;
  model["object"] = "model";
  model["created"] = created;
  model["owned_by"] = "conveyor";
  model["max_model_len"] = context_length;
  json::object list;
  list["object"] = "list";
  list["data"] = json::array{std::move(model)};
  return json::serialize(list);
}

std::string health_json(Health health) {
  switch (health) {
    case Health::ok: break;
    case Health::draining:
      return json::serialize(json::object{
          {"status", "draining"},
          {"message", "the server is shutting down: requests already running finish, new ones are refused"}});
    case Health::restarting:
      return json::serialize(json::object{
          {"status", "restarting"},
          {"message", "the engine is restarting after a fault; running requests resume when it is back"}});
    case Health::no_nodes:
      return json::serialize(json::object{
          {"status", "unavailable"}, {"message", "no engine node is up: requests are refused until one is"}});
  }
  return json::serialize(json::object{{"status", "ok"}});
}

std::string make_response_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[25];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return std::string(prefix) + hex;
}

int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace conveyor::http
