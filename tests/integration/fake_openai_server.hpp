// A tiny OpenAI-style streaming server for testing the load generator
// without the engine: GET /v1/models, and POST /v1/completions or
// /v1/chat/completions answered with SSE chunks of `tokens_per_chunk`
// tokens, `chunk_delay` apart, then a usage chunk and `data: [DONE]`.
// It runs on its own thread (Asio coroutines) on 127.0.0.1, a free port.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace conveyor::testing {

struct FakeServerOptions {
  int tokens_per_chunk = 1;
  std::chrono::milliseconds chunk_delay{2};
  int fail_every = 0;          // every n-th request (1-based) gets `fail_status`; 0: none
  int fail_status = 429;
  int truncate_every = 0;      // every n-th request ends without [DONE]; 0: none
  bool keep_alive = true;      // false: "Connection: close" after each response
  bool close_without_notice = false;  // promise keep-alive, then close anyway (a stale pooled connection)
};

class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(FakeServerOptions options = {});
  ~FakeOpenAiServer();
  FakeOpenAiServer(const FakeOpenAiServer&) = delete;
  FakeOpenAiServer& operator=(const FakeOpenAiServer&) = delete;

  uint16_t port() const;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }
  int64_t connections() const;        // accepted so far
  int64_t requests() const;           // generation requests so far
  int64_t max_in_flight() const;      // most generation requests streaming at once
  std::string last_body() const;      // the last generation request's body

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor::testing
