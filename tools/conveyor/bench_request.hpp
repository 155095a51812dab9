// The HTTP side of `conveyor bench` that needs no socket: the server's
// address, and the JSON body of one streaming request.
#pragma once

#include <string>
#include <string_view>

#include "base/status.hpp"
#include "tools/conveyor/bench_workload.hpp"

namespace conveyor::bench {

// "http://HOST[:PORT][/PREFIX]"; the port defaults to 80. https is not
// supported (the server listens on plain HTTP).
struct ServerUrl {
  std::string host;
  std::string port;
  std::string prefix;  // "" or "/something", without a trailing '/'
  std::string api_key;  // sent as "Authorization: Bearer KEY" where not empty (not part of the URL)
  static Expected<ServerUrl> parse(std::string_view url);
  std::string host_header() const { return host + ":" + port; }
};

enum class Endpoint { completions, chat };
std::string_view endpoint_path(Endpoint e);  // "/v1/completions" or "/v1/chat/completions"

struct RequestOptions {
  std::string model;
  bool ignore_eos = true;
  double temperature = 0.0;
};

// A streaming request with usage in the last chunk and token ids in every
// chunk (so chunks carrying several tokens count right). Token-id prompts
// need the completions endpoint; chat sends the prompt text as one user
// message.
std::string build_request_body(Endpoint endpoint, const RequestSpec& spec, const RequestOptions& options);

}  // namespace conveyor::bench
