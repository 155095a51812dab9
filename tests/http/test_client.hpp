// Clients for the server tests: a Beast HTTP client (plain and SSE, with a
// way to hang up mid-stream), a Beast WebSocket client, and curl run as a
// subprocess. Every network wait is bounded (kTimeout), so a broken server
// fails a test instead of hanging it. This header does not include Beast: the
// test files that use it stay light to compile.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::http::testing {

inline constexpr std::chrono::milliseconds kTimeout{15000};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Response {
  int status = 0;                              // 0: no response (connection failed or closed)
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string error;                           // what went wrong when status == 0
};

Response http_request(uint16_t port, const std::string& method, const std::string& target,
                      const std::string& body = "", const Headers& headers = {});

// POSTs `body` and reads the SSE response chunk by chunk, calling on_event
// with each `data:` payload; when on_event returns false the client closes
// the connection at once (a client going away mid-stream). The response's
// body holds everything read.
Response sse_request(uint16_t port, const std::string& target, const std::string& body,
                     const std::function<bool(const std::string&)>& on_event, const Headers& headers = {});

// The `data:` payloads of a whole SSE body.
std::vector<std::string> sse_payloads(const std::string& body);

class WsClient {
 public:
  explicit WsClient(uint16_t port, const Headers& headers = {});
  ~WsClient();
  bool connected() const;
  int upgrade_status() const;   // 101 on success, else the HTTP status the server sent
  void send(const std::string& text);
  // The next message, or nullopt when none came within `timeout` or the socket closed.
  std::optional<std::string> read(std::chrono::milliseconds timeout = kTimeout);
  void close();                 // a clean WebSocket close
  void drop();                  // the TCP connection closed without a goodbye
  // The code of the close frame the server sent (1009: message too big;
  // 1008: policy violation), once a read found the socket closed; 0 if none came.
  int close_code() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A bare TCP connection, for clients that misbehave: that send nothing, or
// trickle a request one byte at a time.
class RawClient {
 public:
  explicit RawClient(uint16_t port);
  ~RawClient();
  bool connected() const;
  // False once the server has closed (or reset) the connection.
  bool send(const std::string& bytes);
  // Reads until the server closes the connection (true) or `timeout` passes
  // (false); what arrives is appended to `received`.
  bool wait_closed(std::chrono::milliseconds timeout, std::string* received = nullptr);
  // Reads until `text` is among the bytes received so far (true), the
  // connection closes or `timeout` passes (false).
  bool read_until(const std::string& text, std::chrono::milliseconds timeout = kTimeout);
  const std::string& received() const;
  // What was received so far, which read_until() then forgets.
  std::string take_received();
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct CurlResult {
  int exit_code = -1;
  int http_status = 0;
  std::string body;
};
// Runs `curl -sS` with `args`, plus -w for the status; `data`, when given, is
// sent with --data-binary from a temporary file.
CurlResult curl(const std::vector<std::string>& args, const std::optional<std::string>& data = std::nullopt);
bool curl_available();

}  // namespace conveyor::http::testing
