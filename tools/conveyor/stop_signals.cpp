#include "tools/conveyor/stop_signals.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <initializer_list>
#include <thread>

namespace conveyor::cli::stop_signals {
namespace {

int g_pipe[2] = {-1, -1};
std::atomic<bool> g_serving{false};

[[noreturn]] void exit_during_start(int signal) {
  static const char message[] = "conveyor: stopped by a signal while starting\n";
  [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, message, sizeof message - 1);
  _exit(128 + signal);
}

extern "C" void to_pipe(int signal) {
  if (signal != SIGHUP && !g_serving.load()) exit_during_start(signal);
  post(char(signal));
}

sigset_t set_of(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  return set;
}

sigset_t the_signals() { return set_of({SIGINT, SIGTERM, SIGHUP}); }

}  // namespace

Status install() {
  if (pipe(g_pipe) != 0) return make_error(Errc::io_error, "cannot create a pipe");
  struct sigaction on_signal = {};
  on_signal.sa_handler = to_pipe;
  sigemptyset(&on_signal.sa_mask);
  on_signal.sa_flags = 0;  // no SA_RESTART: see the header
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &on_signal, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  const sigset_t set = the_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // Inherits the mask: sigtimedwait takes what comes while starting. Detached:
  // a start that fails returns with it still running.
  std::thread([] {
    const sigset_t stops = set_of({SIGINT, SIGTERM});
    while (!g_serving.load()) {
      const timespec poll = {0, 50'000'000};
      const int signal = sigtimedwait(&stops, nullptr, &poll);
      if (signal <= 0) continue;
      if (!g_serving.load()) exit_during_start(signal);
      post(char(signal));  // it serves already: wait() has it
      return;
    }
  }).detach();
  return Status::ok();
}

void unblock() {
  g_serving = true;  // the watcher ends within its poll (a signal it takes meanwhile goes to wait())
  const sigset_t set = the_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // one that came meanwhile is handled now
}

char wait() {
  char byte = kDrained;
  while (read(g_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  return byte;
}

void post(char byte) { [[maybe_unused]] const ssize_t n = write(g_pipe[1], &byte, 1); }

}  // namespace conveyor::cli::stop_signals
