// libFuzzer target: everything the server does with a request's bytes before
// the engine sees it. The input is one raw HTTP/1.1 request: Beast's parser
// reads it (with the server's body limit), the router matches its method and
// target, and the body goes through the route's parser: the OpenAI request
// parser for /v1/completions, /v1/chat/completions and a WebSocket message,
// the planner (tokenizing text prompts with the byte tokenizer of the
// embedded default model, parse_special included), /tokenize, /detokenize and
// the chat render. Bodies that do not parse as HTTP are also fed to the
// parsers directly, as a WebSocket message would be.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/api_request.hpp"
#include "http/request_plan.hpp"
#include "http/routes.hpp"
#include "http/tokenize_routes.hpp"

namespace {

namespace bhttp = boost::beast::http;
using namespace conveyor;
using namespace conveyor::http;

const ModelContext& model() {
  static const ModelContext m = [] {
    ModelConfig c;
    c.name = "fuzz";
    c.vocab_size = 258;
    c.context_length = 256;
    auto context = make_model_context(c, make_byte_tokenizer(), "fuzz", "auto", "");
    if (!context) __builtin_trap();
    return std::move(context).value();
  }();
  return m;
}

void run_body(Route route, std::string_view body) {
  switch (route) {
    case Route::completions:
    case Route::chat:
    case Route::websocket: {
      const Endpoint e = route == Route::completions ? Endpoint::completions
                         : route == Route::chat      ? Endpoint::chat
                                                     : Endpoint::websocket;
      ParseResult r = parse_api_request(body, e);
      if (!r.error && !r.request.cancel) (void)plan_request(r.request, model());
      return;
    }
    case Route::tokenize: (void)tokenize_response(body, model()); return;
    case Route::detokenize: (void)detokenize_response(body, model()); return;
    case Route::render: (void)render_response(body, model()); return;
    default: return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  bhttp::request_parser<bhttp::string_body> parser;
  parser.body_limit(1 << 20);
  parser.header_limit(16 << 10);
  boost::system::error_code ec;
  parser.eager(true);
  parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (!ec && parser.is_done()) {
    const auto& req = parser.get();
    const RouteMatch m = match_route(std::string_view(req.method_string().data(), req.method_string().size()),
                                     std::string_view(req.target().data(), req.target().size()));
    (void)authorized(std::string_view(req[bhttp::field::authorization].data(),
                                      req[bhttp::field::authorization].size()),
                     "secret");
    run_body(m.route, req.body());
  } else {
    for (Route r : {Route::completions, Route::chat, Route::websocket, Route::tokenize,
                    Route::detokenize, Route::render})
      run_body(r, bytes);
  }
  return 0;
}
