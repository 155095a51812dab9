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
#pragma once

#include "base/status.hpp"

namespace conveyor::cli::stop_signals {

inline constexpr char kDrained = 0;

// Before any thread but the main one exists. Also ignores SIGPIPE.
Status install();
// On the main thread, once the other threads exist.
void unblock();
// The next signal's number, or kDrained.
char wait();
// Async-signal-safe, from any thread.
void post(char byte);

}  // namespace conveyor::cli::stop_signals
