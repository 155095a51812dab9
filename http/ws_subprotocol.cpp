#include "http/ws_subprotocol.hpp"

#include <cstdint>

namespace conveyor::http {

namespace {

// Calls `f` with each trimmed item of a comma-separated header value until it returns true.
template <typename F>
bool any_item(std::string_view header, F f) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (f(item)) return true;
  }
  return false;
}

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

}  // namespace

std::optional<std::string> base64url_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    const int v = sextet(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | uint32_t(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(char((bits >> count) & 0xff));
    }
  }
  return out;
}

std::optional<std::string> ws_protocol_key(std::string_view header) {
  std::optional<std::string> key;
  any_item(header, [&](std::string_view item) {
    if (!item.starts_with(kWsKeyProtocolPrefix)) return false;
    key = base64url_decode(item.substr(kWsKeyProtocolPrefix.size()));
    return true;
  });
  return key;
}

bool ws_offers_protocol(std::string_view header, std::string_view protocol) {
  return any_item(header, [&](std::string_view item) { return item == protocol; });
}

}  // namespace conveyor::http
