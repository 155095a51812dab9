// The subcommands of `conveyor`. Each file adds one subcommand to the app;
// its callback stores the exit code in `exit_code`.
//
// Exit codes: 0 success, 1 a failure at run time (a model that does not load),
// 2 bad arguments (the message says which).
#pragma once

#include <CLI/CLI.hpp>

namespace conveyor::cli {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

void add_generate_command(CLI::App& app, int& exit_code);
void add_convert_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);
void add_router_command(CLI::App& app, int& exit_code);

}  // namespace conveyor::cli
