// The soak's clients: many streaming requests against a running server,
// each abandoned at a point planned in advance, over SSE (/v1/completions,
// /v1/chat/completions) and WebSocket (/v1/ws), and a tally of how each one
// ended.
//
// One io_context on the calling thread runs everything. SSE streams get a
// connection each. WebSocket streams share sockets: each socket keeps up to
// ws_per_socket requests in flight and takes the next planned WebSocket
// stream when one ends; a stream abandoned by closing its socket takes the
// socket's other requests with it (they count as abandoned too: the client
// closed under them), and a fresh socket carries on.
//
// How a stream ends (StreamEnd):
//   completed  the whole answer arrived: SSE a finish_reason and [DONE];
//              WebSocket a final event with finish_reason stop or length.
//   abandoned  the client left first (closed the connection or socket, or
//              sent a cancel: a cancelled WebSocket request must still get
//              its final event, else it is lost).
//   lost       anything else: an error status or event, a final event with
//              finish_reason "error", a connection the server closed early,
//              no answer within `timeout_s`. The kind is in StreamOutcome::error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::soak {

enum class Transport : uint8_t { sse_completions, sse_chat, ws };

// How a client leaves a stream before its end.
enum class Abandon : uint8_t {
  none,    // reads to the end (then an SSE client closes its connection)
  close,   // SSE: closes the TCP connection; WebSocket: a clean close of the socket
  drop,    // WebSocket: closes the TCP connection without a close frame
  cancel,  // WebSocket: sends {"type": "cancel"} and waits for the final event
};

struct StreamPlan {
  Transport transport = Transport::sse_completions;
  std::string body;          // the request's JSON; a WebSocket message gets "id" added in front
  Abandon abandon = Abandon::none;
  // Abandon after this many events (SSE `data:` payloads but [DONE];
  // WebSocket delta events): 0 abandons before any answer.
  int32_t after_events = 0;
  // With after_events 0: abandon as soon as the request is written, before
  // the response header (SSE) -- the request is then usually still waiting.
  bool before_response = false;
};

enum class StreamEnd : uint8_t { completed, abandoned, lost };

struct StreamOutcome {
  StreamEnd end = StreamEnd::lost;
  int32_t events = 0;        // events read before it ended
  bool collateral = false;   // abandoned because another stream closed the socket they shared
  std::string error;         // why it was lost, as a short kind ("http 500", "timeout", ...)
};

struct ClientOptions {
  uint16_t port = 0;
  int32_t concurrency = 64;   // streams in flight at once, SSE and WebSocket together
  int32_t ws_per_socket = 4;  // WebSocket requests in flight on one socket
  double timeout_s = 60;      // longest wait for any one step (connect, write, the next event)
};

// Runs every plan to its end; outcomes in the order of `plans`.
std::vector<StreamOutcome> run_streams(const std::vector<StreamPlan>& plans, const ClientOptions& options);

// GET `target` on 127.0.0.1:port: the body, or "" when it fails.
std::string http_get(uint16_t port, const std::string& target, double timeout_s);

}  // namespace conveyor::soak
