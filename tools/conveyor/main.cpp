// conveyor: an LLM serving framework built on actors. Entry point of the
// command; see `conveyor --help`.
#include <iostream>

#include "tools/conveyor/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"conveyor: continuous-batching LLM inference on actors"};
  app.require_subcommand(1);
  int exit_code = 0;
  conveyor::cli::add_generate_command(app, exit_code);
  conveyor::cli::add_convert_command(app, exit_code);
  conveyor::cli::add_bench_command(app, exit_code);
  conveyor::cli::add_serve_command(app, exit_code);
  conveyor::cli::add_router_command(app, exit_code);
  if (auto code = conveyor::cli::parse_command_line(app, argc, argv)) return *code;
  return exit_code;
}
