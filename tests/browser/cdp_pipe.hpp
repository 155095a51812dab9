// Headless Chromium driven over the Chrome DevTools Protocol, for the
// browser tests. The protocol runs over a pair of pipes
// (--remote-debugging-pipe: the browser reads commands on its fd 3 and
// writes answers and events on fd 4, each a JSON text ended by a NUL byte),
// so there is no port to pick or race for, no WebSocket client, and the
// browser cannot outlive a crashed test by much: it exits when the pipes
// close. Every wait is bounded.
#pragma once

#include <sys/types.h>

#include <boost/json.hpp>
#include <chrono>
#include <string>
#include <vector>

namespace conveyor::browser_testing {

class HeadlessChromium {
 public:
  // $CHROMIUM if set, else the first of chromium, chromium-browser,
  // google-chrome found in PATH; "" when there is none.
  static std::string find_binary();

  // Starts `binary` headless on about:blank with a fresh profile in
  // `profile_dir`; its own output goes to `log_path`.
  HeadlessChromium(const std::string& binary, const std::string& profile_dir, const std::string& log_path);
  ~HeadlessChromium();  // closes the pipes, then SIGTERM (SIGKILL after 5 s) to its process group
  HeadlessChromium(const HeadlessChromium&) = delete;
  HeadlessChromium& operator=(const HeadlessChromium&) = delete;

  struct Reply {
    bool ok = false;
    boost::json::object result;  // when ok
    std::string error;           // when not: the protocol's error, a timeout, a closed pipe
  };
  // Sends one command (to the page `session`, from Target.attachToTarget
  // with flatten, or to the browser when empty) and waits for its answer;
  // events that come meanwhile are kept in events().
  Reply call(const std::string& method, boost::json::object params = {}, const std::string& session = {},
             std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Every event received so far: {"method", "params", ["sessionId"]}.
  const std::vector<boost::json::object>& events() const { return events_; }

 private:
  bool read_message(std::chrono::steady_clock::time_point deadline, std::string& message, std::string& error);

  pid_t pid_ = -1;
  int to_browser_ = -1;
  int from_browser_ = -1;
  std::string pending_;  // bytes read past the last whole message
  int64_t next_id_ = 1;
  std::vector<boost::json::object> events_;
};

}  // namespace conveyor::browser_testing
