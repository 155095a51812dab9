// The HTTP surface in one table, and the wire details that need no Beast:
// routing, the API key check, Server-Sent Events framing.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::http {

enum class Route : uint8_t {
  health,       // GET  /health
  metrics,      // GET  /metrics
  models,       // GET  /v1/models
  completions,  // POST /v1/completions
  chat,         // POST /v1/chat/completions
  embeddings,   // POST /v1/embeddings
  responses,    // POST /v1/responses: the Responses API
  response,     // GET, DELETE /v1/responses/{id}: a stored response (RouteMatch::id)
  response_input_items,  // GET /v1/responses/{id}/input_items: its input items (RouteMatch::id)
  websocket,    // GET  /v1/ws (upgrade)
  render,       // POST /v1/chat/completions/render: the prompt a chat request makes
  tokenize,     // POST /tokenize
  detokenize,   // POST /detokenize
  release_session,  // POST /v1/sessions/release: let go of a session's kept KV
  page,         // GET  /, /playground.js, /playground.css: the browser playground (no key)
  not_found,
  wrong_method,
};

struct RouteMatch {
  Route route = Route::not_found;
  const char* allow = "";   // the allowed method, for 405's Allow header
  bool needs_key = false;   // /v1/*, /tokenize, /detokenize: with API keys
                            // (--api-key, --api-key-file), needs "Authorization: Bearer KEY"
  std::string_view id;      // Route::response*: the {id} of the path (a view into the target)
};

// `target` may carry a query string; it is ignored. HEAD matches what GET
// matches, but the WebSocket upgrade.
RouteMatch match_route(std::string_view method, std::string_view target);
// A request target in origin form ("/path?query"): the absolute form a proxy
// sends ("http://host:port/path?query"; RFC 9112 3.2.2 asks every server to
// accept it) loses its scheme and authority ("/" when no path follows
// them); other targets are returned as they are.
std::string_view origin_form(std::string_view target);

// True when no key is configured, or `authorization` is "Bearer KEY"
// (compared in constant time). Several keys: http/key_gate.hpp.
bool authorized(std::string_view authorization, const std::string& api_key);
// The KEY of an Authorization header "Bearer KEY"; nullopt for any other form.
std::optional<std::string_view> bearer_token(std::string_view authorization);
// given == key, in time that depends on key's length only, not on the content
// of either (so timing does not reveal how much of a guess was right).
bool constant_time_equal(std::string_view given, std::string_view key);

// One HTTP/1.1 chunk holding `payloads` as SSE events: "data: P\n\n" each.
std::string sse_chunk(const std::vector<std::string>& payloads);
// One HTTP/1.1 chunk holding `data` (not empty: an empty chunk ends the body).
std::string http_chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace conveyor::http
