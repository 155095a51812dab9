#include "tools/conveyor/stop_signals.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace conveyor::cli::stop_signals {
namespace {

int g_pipe[2] = {-1, -1};

extern "C" void to_pipe(int signal) { post(char(signal)); }

sigset_t the_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  return set;
}

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
  return Status::ok();
}

void unblock() {
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
