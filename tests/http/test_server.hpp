// A conveyor server running in-process on a free loopback port, in front of
// an engine on the embedded default model (byte tokenizer, plain chat
// template), for the HTTP and WebSocket tests. The engine is reachable
// directly too, so a test can compare what the server says with what the
// engine produces in-process. No CAF or Beast in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_config.hpp"
#include "http/server_options.hpp"
#include "model/formats/loader.hpp"
#include "base/status.hpp"

namespace conveyor::http::testing {

// A small engine for fast tests: 16-token blocks, 8192 tokens of KV cache.
EngineConfig small_engine();

class TestServer {
 public:
  explicit TestServer(EngineConfig engine = small_engine(), ServerOptions server = {});
  // The same in front of `model` (its chat_template is the GGUF's).
  TestServer(LoadedModel model, EngineConfig engine, ServerOptions server);
  ~TestServer();

  uint16_t port() const;
  const std::string& model_name() const;
  int32_t context_length() const;
  // The prompt ids the server makes of `text` (the model's tokenizer, with BOS).
  std::vector<int32_t> encode(const std::string& text) const;
  // Greedy generation in-process on the same engine: the reference.
  std::vector<int32_t> engine_greedy(const std::vector<int32_t>& prompt, int32_t max_tokens,
                                     bool ignore_eos = false);
  void stop();  // the server's graceful stop
  Expected<uint16_t> start_again();  // Server::start() a second time
  Status reload_api_keys();  // what SIGHUP does in `conveyor serve`

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor::http::testing
