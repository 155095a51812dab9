#include "http/playground/page_response.hpp"

namespace conveyor::http {

namespace bhttp = boost::beast::http;

bool etag_matches(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view tag = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
  }
  return false;
}

bhttp::response<bhttp::string_body> playground_response(const PlaygroundAsset& asset,
                                                        std::string_view if_none_match, bool keep_alive) {
  const bool not_modified = etag_matches(if_none_match, asset.etag);
  bhttp::response<bhttp::string_body> res{not_modified ? bhttp::status::not_modified : bhttp::status::ok, 11};
  res.set(bhttp::field::server, "conveyor");
  res.set(bhttp::field::etag, asset.etag);
  res.set(bhttp::field::cache_control, "no-cache");
  if (!not_modified) {
    res.set(bhttp::field::content_type, asset.content_type);
    res.set("Content-Security-Policy", kPlaygroundCsp);
    res.set("X-Content-Type-Options", "nosniff");
    res.set("X-Frame-Options", "DENY");
    res.set("Referrer-Policy", "no-referrer");
    res.body() = std::string(asset.body);
    res.prepare_payload();
  }
  res.keep_alive(keep_alive);  // a 304 has no body, and so no Content-Length
  return res;
}

}  // namespace conveyor::http
