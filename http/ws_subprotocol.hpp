// The API key on a WebSocket upgrade from a browser, which cannot set an
// Authorization header on it: the client offers the subprotocols
//   Sec-WebSocket-Protocol: conveyor.v1, conveyor.key.<KEY in base64url, no padding>
// and the server answers with "conveyor.v1", never echoing the key. Base64url
// keeps any key within the characters a subprotocol name may hold. This is
// Kubernetes' scheme for browser WebSockets ("base64url.bearer.authorization.k8s.io.").
// A header, not the URL: a query string ends up in proxies' and browsers'
// logs and history. An Authorization header, when present, wins.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace conveyor::http {

inline constexpr std::string_view kWsProtocol = "conveyor.v1";
inline constexpr std::string_view kWsKeyProtocolPrefix = "conveyor.key.";

// The key that the Sec-WebSocket-Protocol value `header` (a comma-separated
// list) carries, decoded; nullopt when it carries none or it is not base64url.
std::optional<std::string> ws_protocol_key(std::string_view header);

// True when `header` offers `protocol` (then the handshake must answer it:
// a browser refuses an answer without one of the protocols it offered).
bool ws_offers_protocol(std::string_view header, std::string_view protocol);

// Unpadded (or padded) base64url; nullopt on any other character.
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace conveyor::http
