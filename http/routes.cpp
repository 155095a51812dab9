#include "http/routes.hpp"

#include <cctype>
#include <cstdio>

#include "http/playground/assets.hpp"

namespace conveyor::http {

RouteMatch match_route(std::string_view method, std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  struct Entry {
    std::string_view path;
    std::string_view method;
    Route route;
  };
  static constexpr Entry table[] = {
      {"/health", "GET", Route::health},
      {"/metrics", "GET", Route::metrics},
      {"/v1/models", "GET", Route::models},
      {"/v1/completions", "POST", Route::completions},
      {"/v1/chat/completions", "POST", Route::chat},
      {"/v1/embeddings", "POST", Route::embeddings},
      {"/v1/responses", "POST", Route::responses},
      {"/v1/ws", "GET", Route::websocket},
      {"/v1/chat/completions/render", "POST", Route::render},
      {"/tokenize", "POST", Route::tokenize},
      {"/detokenize", "POST", Route::detokenize},
      {"/v1/sessions/release", "POST", Route::release_session},
  };
  // HEAD is GET without the body (RFC 9110 asks every server for both),
  // except for the WebSocket upgrade.
  auto allowed = [&](std::string_view wanted, Route route) {
    return method == wanted || (method == "HEAD" && wanted == "GET" && route != Route::websocket);
  };
  for (const Entry& e : table) {
    if (e.path != path) continue;
    RouteMatch m;
    m.needs_key = path != "/health" && path != "/metrics";
    m.allow = e.method.data();
    m.route = allowed(e.method, e.route) ? e.route : Route::wrong_method;
    return m;
  }
  // /v1/responses/{id} and /v1/responses/{id}/input_items.
  constexpr std::string_view kResponsePrefix = "/v1/responses/";
  constexpr std::string_view kInputItems = "/input_items";
  if (path.starts_with(kResponsePrefix) && path.size() > kResponsePrefix.size()) {
    RouteMatch m;
    m.needs_key = true;
    m.id = path.substr(kResponsePrefix.size());
    const size_t slash = m.id.find('/');
    if (slash == std::string_view::npos) {
      m.allow = "GET, DELETE";
      m.route = allowed("GET", Route::response) || method == "DELETE" ? Route::response : Route::wrong_method;
      return m;
    }
    if (slash > 0 && m.id.substr(slash) == kInputItems) {
      m.id = m.id.substr(0, slash);
      m.allow = "GET";
      m.route = allowed("GET", Route::response_input_items) ? Route::response_input_items : Route::wrong_method;
      return m;
    }
  }
  if (find_playground_asset(path)) {
    RouteMatch m;
    m.allow = "GET";
    m.route = allowed("GET", Route::page) ? Route::page : Route::wrong_method;
    return m;
  }
  return RouteMatch{};
}

std::string_view origin_form(std::string_view target) {
  for (const std::string_view scheme : {std::string_view("http://"), std::string_view("https://")}) {
    if (target.size() < scheme.size()) continue;
    bool same = true;  // schemes are case-insensitive (RFC 9110 4.2.3)
    for (size_t i = 0; i < scheme.size(); ++i) same &= char(std::tolower(uint8_t(target[i]))) == scheme[i];
    if (!same) continue;
    // The authority ends at the first '/' or '?'; with no path, "/" (the
    // query of "http://host?q" is dropped: no route reads one on "/").
    const size_t end = target.find_first_of("/?", scheme.size());
    return end == std::string_view::npos || target[end] == '?' ? std::string_view("/") : target.substr(end);
  }
  return target;
}

bool authorized(std::string_view authorization, const std::string& api_key) {
  if (api_key.empty()) return true;
  const auto given = bearer_token(authorization);
  return given && constant_time_equal(*given, api_key);
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  // The scheme is case-insensitive (RFC 9110 11.1): "bearer KEY" too.
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() < scheme.size()) return std::nullopt;
  for (size_t i = 0; i < scheme.size(); ++i)
    if (char(std::tolower(uint8_t(authorization[i]))) != scheme[i]) return std::nullopt;
  return authorization.substr(scheme.size());
}

bool constant_time_equal(std::string_view given, std::string_view key) {
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= unsigned(uint8_t(key[i]) ^ uint8_t(i < given.size() ? given[i] : 0));
  return diff == 0;
}

std::string sse_chunk(const std::vector<std::string>& payloads) {
  size_t size = 0;
  for (const std::string& p : payloads) size += p.size() + 8;  // "data: " + "\n\n"
  char head[24];
  const int n = std::snprintf(head, sizeof head, "%zx\r\n", size);
  std::string out;
  out.reserve(size + size_t(n) + 2);
  out.append(head, size_t(n));
  for (const std::string& p : payloads) {
    out += "data: ";
    out += p;
    out += "\n\n";
  }
  out += "\r\n";
  return out;
}

std::string http_chunk(std::string_view data) {
  char head[24];
  const int n = std::snprintf(head, sizeof head, "%zx\r\n", data.size());
  std::string out;
  out.reserve(data.size() + size_t(n) + 2);
  out.append(head, size_t(n)).append(data).append("\r\n");
  return out;
}

}  // namespace conveyor::http
