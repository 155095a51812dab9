// What a web page in someone's browser may ask of this server. A page of
// another origin must not drive a local conveyor: a WebSocket upgrade
// carries its page's Origin, which must be the server's own (the playground)
// or one that --allowed-origins names; a POST body must be declared JSON,
// which a page of another origin cannot do without the browser first asking
// the server (a CORS preflight), and the server grants CORS only to the origins
// --allowed-origins names, as vLLM's option does. Requests without an Origin
// are not a page's (curl, SDKs) and pass.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace conveyor::http {

// "*", or a comma-separated list of origins ("https://app.example.com,
// http://localhost:3000"): scheme, host and an optional port, no path.
Expected<std::vector<std::string>> parse_allowed_origins(std::string_view text);

// Whether a request with this Origin header (empty: none) to a server that
// the request reached as `host` (its Host header) may proceed: no Origin,
// the server's own origin, "*" or an origin in `allowed` (case-insensitive).
bool origin_allowed(std::string_view origin, std::string_view host, std::span<const std::string> allowed);

// The Access-Control-Allow-Origin a response to this Origin carries: the
// origin itself when --allowed-origins names it, "*" when it is "*", ""
// (no CORS) otherwise, the server's own pages included (they need none).
std::string cors_allow_origin(std::string_view origin, std::span<const std::string> allowed);

// Whether a POST body may be read as JSON: its Content-Type says
// application/json (any parameters and case), or it has none and no Origin
// header says a page sent it (curl, SDKs). A page's browser sends a body of
// no type without a preflight (fetch with a Blob body), so a page's request
// must name JSON.
bool json_body_accepted(std::string_view content_type, std::string_view origin);

}  // namespace conveyor::http
