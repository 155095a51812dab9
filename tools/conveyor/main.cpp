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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help or the error message
    return code == 0 ? 0 : conveyor::cli::kExitUsage;
  }
  return exit_code;
}
