// The HTTP answer for one playground asset: the file with its Content-Type,
// a Content-Security-Policy that allows only this origin (no inline script
// or style, no other hosts, no framing), and caching by ETag: "no-cache"
// makes a browser ask again each time, and a matching If-None-Match gets
// 304 without the body, so a new binary's page is never stale.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string_view>

#include "http/playground/assets.hpp"

namespace conveyor::http {

inline constexpr std::string_view kPlaygroundCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// 200 with the body, or 304 when `if_none_match` (the request's header,
// possibly a list, or "*") names the asset's ETag.
boost::beast::http::response<boost::beast::http::string_body> playground_response(
    const PlaygroundAsset& asset, std::string_view if_none_match, bool keep_alive);

// True when the If-None-Match value `header` matches `etag` (weak or strong).
bool etag_matches(std::string_view header, std::string_view etag);

}  // namespace conveyor::http
