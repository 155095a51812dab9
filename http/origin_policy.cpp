#include "http/origin_policy.hpp"

#include "base/text.hpp"

namespace conveyor::http {
namespace {

// "http://host[:port]" or "https://..." with no path, query or user.
bool is_origin(std::string_view o) {
  std::string_view rest;
  if (o.starts_with("http://")) rest = o.substr(7);
  else if (o.starts_with("https://")) rest = o.substr(8);
  else return false;
  return !rest.empty() && rest.find_first_of("/?#@ ") == std::string_view::npos;
}

}  // namespace

Expected<std::vector<std::string>> parse_allowed_origins(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = trim_space(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.size() > 1 && item.back() == '/') item.remove_suffix(1);  // as written in a browser's bar
    if (item.empty()) continue;
    if (item != "*" && !is_origin(item)) {
      std::string message = "'";  // appended, not concatenated: GCC 12 warns falsely (-Wstringop-overflow)
      message.append(item).append("' is not an origin (scheme://host[:port], as a browser sends it, or *)");
      return make_error(Errc::invalid_argument, std::move(message));
    }
    out.push_back(ascii_lower(item));
  }
  return out;
}

bool origin_allowed(std::string_view origin, std::string_view host, std::span<const std::string> allowed) {
  if (origin.empty()) return true;
  const std::string o = ascii_lower(origin);
  for (const std::string& a : allowed)
    if (a == "*" || a == o) return true;
  // The server's own pages: the origin names the host the request came to.
  const std::string h = ascii_lower(host);
  return !h.empty() && (o == "http://" + h || o == "https://" + h);
}

std::string cors_allow_origin(std::string_view origin, std::span<const std::string> allowed) {
  if (origin.empty()) return {};
  const std::string o = ascii_lower(origin);
  for (const std::string& a : allowed) {
    if (a == "*") return "*";
    if (a == o) return std::string(origin);
  }
  return {};
}

bool json_body_accepted(std::string_view content_type, std::string_view origin) {
  const std::string_view media = trim_space(content_type.substr(0, content_type.find(';')));
  if (media.empty()) return origin.empty();
  return ascii_lower(media) == "application/json";
}

}  // namespace conveyor::http
