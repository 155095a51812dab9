// SIGINT, SIGTERM and SIGHUP for the long-running subcommands (serve,
// router): a handler writes the signal's number to a pipe, and the main
// thread waits on the pipe with one blocking read (for the end of a drain
// too, which posts kDrained).
//
// install() blocks the three on the main thread before it creates the others
// (the actor system's, the server's, and OpenMP's that those create), which
// inherit the mask; unblock() lifts it there once they exist: so the kernel
// hands the signals to the main thread (or to a thread that existed before
// main, where the handler is as safe). The handler has no SA_RESTART, so the
// main thread's read returns EINTR: ThreadSanitizer defers a signal until its
// thread leaves an intercepted call, and with the read restarted in the
// kernel the TSan-built server never saw SIGTERM.
//
// Until unblock(), nothing is served and nothing can be drained: a SIGINT or
// SIGTERM then exits at once with 128 + its number (loading a model and
// touching its KV cache can take a minute, which an operator's stop should
// not wait for). A thread started by install() takes them with sigtimedwait
// (the signals stay blocked on every thread created meanwhile); the handler
// does the same where it runs. SIGHUP waits for unblock().
#pragma once

#include "base/status.hpp"

namespace conveyor::cli::stop_signals {

inline constexpr char kDrained = 0;

// Before any thread but the main one exists. Also ignores SIGPIPE.
Status install();
// On the main thread, once the other threads exist and it serves: signals
// from here on are read by wait().
void unblock();
// The next signal's number, or kDrained.
char wait();
// Async-signal-safe, from any thread.
void post(char byte);

}  // namespace conveyor::cli::stop_signals
