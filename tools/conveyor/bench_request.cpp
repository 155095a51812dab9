#include "tools/conveyor/bench_request.hpp"

#include <charconv>

#include <boost/json.hpp>

namespace conveyor::bench {

Expected<ServerUrl> ServerUrl::parse(std::string_view url) {
  const std::string original(url);
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, 8) == "https://")
    return make_error(Errc::unsupported, "--url " + original + ": https is not supported; use http://");
  if (url.substr(0, kScheme.size()) != kScheme)
    return make_error(Errc::invalid_argument, "--url " + original + ": expected http://HOST:PORT");
  url.remove_prefix(kScheme.size());
  ServerUrl out;
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view prefix = url.substr(slash);
    while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
    out.prefix = std::string(prefix);
  }
  std::string_view port = "80";
  if (!authority.empty() && authority.front() == '[') {  // [::1]:8000
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return make_error(Errc::invalid_argument, "--url " + original + ": unclosed '['");
    out.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty()) {
      if (authority.front() != ':')
        return make_error(Errc::invalid_argument, "--url " + original + ": bad port");
      port = authority.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (out.host.empty() || port.empty() || ec != std::errc() || end != port.data() + port.size() ||
      value == 0 || value > 65535)
    return make_error(Errc::invalid_argument, "--url " + original + ": expected http://HOST:PORT");
  out.port = std::string(port);
  return out;
}

std::string_view endpoint_path(Endpoint e) {
  return e == Endpoint::chat ? "/v1/chat/completions" : "/v1/completions";
}

std::string build_request_body(Endpoint endpoint, const RequestSpec& spec, const RequestOptions& options) {
  boost::json::object body;
  body["model"] = options.model;
  if (endpoint == Endpoint::chat) {
    body["messages"] = boost::json::array{
        boost::json::object{{"role", "user"}, {"content", spec.prompt_text}}};
  } else if (spec.prompt_is_text) {
    body["prompt"] = spec.prompt_text;
  } else {
    boost::json::array ids;
    ids.reserve(spec.prompt_ids.size());
    for (int32_t id : spec.prompt_ids) ids.push_back(id);
    body["prompt"] = std::move(ids);
  }
  body["max_tokens"] = spec.max_tokens;
  body["temperature"] = options.temperature;
  body["stream"] = true;
  body["stream_options"] = boost::json::object{{"include_usage", true}};
  body["ignore_eos"] = options.ignore_eos;
  body["return_token_ids"] = true;
  return boost::json::serialize(body);
}

}  // namespace conveyor::bench
