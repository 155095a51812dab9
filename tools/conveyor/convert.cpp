// `conveyor convert`: export any loadable model (llama2.c checkpoint, dummy,
// GGUF) to a GGUF file that conveyor and llama.cpp read.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "model/formats/gguf_writer.hpp"
#include "model/formats/loader.hpp"
#include "tools/conveyor/commands.hpp"

namespace conveyor::cli {
namespace {

struct ConvertArgs {
  std::string model;
  std::string tokenizer;
  std::string out;
  std::string type = "f32";
};

int run_convert(const ConvertArgs& args) {
  auto type = parse_gguf_file_type(args.type);
  if (!type) {
    std::cerr << "conveyor convert: " << type.error().message << "\n";
    return kExitUsage;
  }
  // The writer replaces --out whole, so an input named again as --out
  // would be lost (and a file being read replaced under its reader).
  for (const std::string* input : {&args.model, &args.tokenizer}) {
    std::error_code ec;
    if (!input->empty() && std::filesystem::equivalent(*input, args.out, ec)) {
      std::cerr << "conveyor convert: --out " << args.out << " is the input file " << *input
                << "; write the converted model to another path\n";
      return kExitUsage;
    }
  }
  // Checked again when writing; here so that a wrong --out fails before
  // the model loads.
  if (Status s = check_gguf_output(args.out); !s) {
    std::cerr << "conveyor convert: --out " << s.error().message << "\n";
    return s.error().code == Errc::invalid_argument ? kExitUsage : kExitFailure;
  }
  LoadOptions options;
  options.tokenizer_path = args.tokenizer;
  options.dequantize = true;  // the writer encodes from float32
  auto loaded = load_model(args.model, options);
  if (!loaded) {
    std::cerr << "conveyor convert: " << loaded.error().message << "\n";
    return load_error_exit_code(loaded.error());
  }
  GgufWriteOptions options_out;
  options_out.file_type = *type;
  if (Status s = write_gguf(*loaded, args.out, options_out); !s) {
    std::cerr << "conveyor convert: " << s.error().message << "\n";
    return kExitFailure;
  }
  std::cout << "wrote " << args.out << "\n";
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand("convert", "Export a model to GGUF");
  cmd->add_option("--model", args->model, "GGUF file, llama2.c checkpoint, or dummy:NAME");
  cmd->add_option("--tokenizer", args->tokenizer, "llama2.c tokenizer file (for llama2.c checkpoints)");
  cmd->add_option("--out", args->out, "output GGUF path")->required();
  cmd->add_option("--type", args->type,
                  "f32 (the default), f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m or q6_k (llama.cpp's mixes of "
                  "tensor types for q4_0 and the _m types)");
  cmd->callback([args, &exit_code] { exit_code = run_convert(*args); });
}

}  // namespace conveyor::cli
