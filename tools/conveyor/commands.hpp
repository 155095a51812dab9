// The subcommands of `conveyor`. Each file adds one subcommand to the app;
// its callback stores the exit code in `exit_code` (base/cli_checks.hpp's
// kExitFailure, kExitUsage).
#pragma once

#include <CLI/CLI.hpp>

#include "base/cli_checks.hpp"

namespace conveyor::cli {

void add_generate_command(CLI::App& app, int& exit_code);
void add_convert_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);
void add_router_command(CLI::App& app, int& exit_code);

}  // namespace conveyor::cli
