// Embeds an installed conveyor: the engine streams one request through a
// callback, then an HTTP server in this program answers a completion on a
// free port. Exit 0 when both did what they should.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <future>
#include <string>

#include "actors/engine.hpp"
#include "actors/pipeline.hpp"
#include "http/server.hpp"
#include "model/formats/loader.hpp"

namespace {

// One HTTP/1.1 request on a fresh connection; the whole response.
std::string http_post(uint16_t port, const std::string& path, const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                                "Content-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    if (::send(fd, request.data(), request.size(), 0) == ssize_t(request.size())) {
      char buffer[4096];
      for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) response.append(buffer, size_t(n));
    }
  }
  if (fd >= 0) ::close(fd);
  return response;
}

}  // namespace

int main() {
  using namespace conveyor;
  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};

  auto loaded = load_model("dummy:llama-15m");  // a shape from share/conveyor/configs/models
  if (!loaded) {
    std::fprintf(stderr, "load_model: %s\n", loaded.error().message.c_str());
    return 1;
  }
  auto engine = Engine::create(sys, EngineConfig{}, std::move(loaded).value());
  if (!engine) {
    std::fprintf(stderr, "Engine::create: %s\n", engine.error().message.c_str());
    return 1;
  }
  RequestSpec spec;
  spec.request.prompt = {1, 403, 407};
  spec.request.sampling.max_tokens = 8;
  std::promise<StreamEvent> last;
  int tokens = 0;
  (*engine)->submit(spec, [&](const StreamEvent& e) {
    tokens += int(e.token_ids.size());
    if (e.last()) last.set_value(e);
  });
  const StreamEvent end = last.get_future().get();
  std::printf("engine: %s after %d tokens (%d streamed)\n", to_string(end.finish), end.completion_tokens, tokens);
  if (end.finish != FinishReason::length || tokens != 8) return 1;
  engine->reset();

  // The embedded default model has a tokenizer, so the server takes text.
  auto tiny = load_model("");
  if (!tiny) return 1;
  const ModelConfig config = tiny->config;
  auto served = Engine::create(sys, EngineConfig{}, std::move(tiny).value());
  if (!served) return 1;
  int status = 1;
  {
    http::EnginePort port(**served);
    auto context = http::make_model_context(config, port.tokenizer(), "tiny", "auto", "");
    if (!context) return 1;
    http::ServerOptions options;
    options.port = 0;
    http::Server server(port, options, std::move(*context));
    auto bound = server.start();
    if (!bound) {
      std::fprintf(stderr, "server: %s\n", bound.error().message.c_str());
      return 1;
    }
    const std::string response =
        http_post(*bound, "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 4})");
    std::printf("server: %s\n", response.substr(0, response.find("\r\n")).c_str());
    if (response.starts_with("HTTP/1.1 200") && response.find("\"completion_tokens\":4") != std::string::npos)
      status = 0;
    server.stop();
  }
  return status;
}
