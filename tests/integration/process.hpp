// Child processes for the integration tests: run a command to completion
// (with a time limit, output captured), or keep `conveyor serve` running on a
// free loopback port for the length of a test suite.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::testing {

struct ProcessResult {
  int exit_code = -1;     // -1 when it was killed or did not start
  bool timed_out = false;
  std::string output;     // stdout and stderr together
};

// Runs argv[0] (looked up in PATH) with `env` ("NAME=value") added to this
// process's environment, in `cwd` when not empty. On timeout the process and
// its children are killed.
ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                          const std::vector<std::string>& env = {}, const std::string& cwd = {});

// A loopback port that was free a moment ago.
uint16_t free_loopback_port();

// `conveyor serve --port P [extra args]` in the background (with `env`
// added to its environment); stopped with SIGTERM (then SIGKILL) on
// destruction. Its output goes to `log_path`.
class ServeProcess {
 public:
  // `command` is the subcommand: serve, or router (the same flags --host and --port).
  ServeProcess(const std::string& conveyor_binary, const std::vector<std::string>& extra_args,
               const std::string& log_path, const std::vector<std::string>& env = {},
               const std::string& command = "serve");
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Waits until GET /v1/models answers; false (and `error` says why, with the
  // end of the server's log) when the server exits or does not answer in time.
  bool wait_ready(std::chrono::seconds timeout, std::string& error);
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  std::string log() const;
  std::string log_tail(size_t bytes = 4000) const;
  // Sends SIGTERM and waits; the exit code, or -1 if it had to be killed.
  int stop(std::chrono::seconds grace = std::chrono::seconds(15));
  // Sends `signal` and returns at once.
  void signal(int signal);
  pid_t pid() const { return pid_; }
  // Waits for it to exit: its exit code; -1 if it died of a signal; -2 (and
  // it is killed) if it still runs after `timeout`.
  int wait_exit(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string log_path_;
};

}  // namespace conveyor::testing
