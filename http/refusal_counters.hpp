// What the server's limits turned away, by reason: /metrics shows them as
// conveyor:http_refused_total{reason="..."} (http/metrics_text.hpp).
//
//   rate_limit       a request over its API key's tokens_per_minute (429)
//   concurrency      a request over its API key's max_concurrent (429)
//   connections      a connection past max_connections (503, then closed)
//   header_timeout   a connection that sent no complete request header within
//                    header_timeout_seconds (closed)
//   idle_timeout     a keep-alive connection idle past idle_timeout_seconds, or
//                    a request body that did not arrive within it (closed)
//   ws_message_size  a WebSocket message larger than max_body_bytes (closed, 1009)
//   ws_rate          a WebSocket past ws_max_messages_per_second (error event, closed)
//   body_size        a request body larger than max_body_bytes (413, closed)
//   header_size      a request line and fields over Beast's 8 KiB (431, closed)
//   output_size      a request whose client read so slowly that more than
//                    max_output_bytes of its output waited (cancelled)
//
// Thread-safety: add() and value() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace conveyor::http {

enum class Refusal : uint8_t {
  rate_limit,
  concurrency,
  connections,
  header_timeout,
  idle_timeout,
  ws_message_size,
  ws_rate,
  body_size,
  header_size,
  output_size,
};
inline constexpr size_t kRefusalKinds = 10;

inline const char* to_string(Refusal r) {
  static constexpr const char* names[kRefusalKinds] = {
      "rate_limit", "concurrency", "connections", "header_timeout", "idle_timeout",
      "ws_message_size", "ws_rate", "body_size", "header_size", "output_size"};
  return names[size_t(r)];
}

class RefusalCounters {
 public:
  void add(Refusal r) { counts_[size_t(r)].fetch_add(1, std::memory_order_relaxed); }
  uint64_t value(Refusal r) const { return counts_[size_t(r)].load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<uint64_t>, kRefusalKinds> counts_{};
};

}  // namespace conveyor::http
