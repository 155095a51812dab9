// The subcommands of `conveyor`. Each file adds one subcommand to the app;
// its callback stores the exit code in `exit_code` (base/cli_checks.hpp's
// kExitFailure, kExitUsage).
#pragma once

#include <CLI/CLI.hpp>

#include "base/cli_checks.hpp"
#include "base/status.hpp"

namespace conveyor::cli {

// A model that did not load: kExitUsage where the path is wrong (missing,
// unreadable, not a model file: io_error, invalid_argument), kExitFailure
// where the file is (corrupt, truncated, unsupported).
inline int load_error_exit_code(const Error& e) {
  return e.code == Errc::io_error || e.code == Errc::invalid_argument ? kExitUsage : kExitFailure;
}

void add_generate_command(CLI::App& app, int& exit_code);
void add_convert_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);
void add_router_command(CLI::App& app, int& exit_code);

}  // namespace conveyor::cli
