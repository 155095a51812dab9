// `conveyor convert`: export any loadable model (llama2.c checkpoint, dummy,
// GGUF) to a GGUF file that conveyor and llama.cpp read.
#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "model/formats/gguf_writer.hpp"
#include "model/formats/loader.hpp"
#include "tools/conveyor/commands.hpp"

namespace conveyor::cli {
namespace {

// SIGINT, SIGTERM or SIGHUP while the file is written: the writer stops and
// removes its temporary file (a multi-gigabyte one, for large models), then
// the command dies of the signal as it would have. A signal the command was
// started ignoring (nohup, a background job's SIGINT) stays ignored; a
// second one takes its default action at once.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the signal handler stores to them");

extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig, std::memory_order_relaxed);
  g_stop.store(true, std::memory_order_relaxed);
}

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// The handler for kStopSignals while it lives; what was there before after.
class StopWhileWriting {
 public:
  StopWhileWriting() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    action.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kStopSignals); ++i) {
      sigaction(kStopSignals[i], nullptr, &previous_[i]);
      caught_[i] = previous_[i].sa_handler != SIG_IGN;
      if (caught_[i]) sigaction(kStopSignals[i], &action, nullptr);
    }
  }
  ~StopWhileWriting() {
    for (size_t i = 0; i < std::size(kStopSignals); ++i)
      if (caught_[i]) sigaction(kStopSignals[i], &previous_[i], nullptr);
  }
  StopWhileWriting(const StopWhileWriting&) = delete;
  StopWhileWriting& operator=(const StopWhileWriting&) = delete;

 private:
  struct sigaction previous_[std::size(kStopSignals)] {};
  bool caught_[std::size(kStopSignals)] = {};
};

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
  options_out.stop = &g_stop;
  Status written = Status::ok();
  {
    StopWhileWriting stop;
    written = write_gguf(*loaded, args.out, options_out);
  }
  if (const int sig = g_signal.load(); sig != 0) {  // asked to stop: it dies of the signal
    if (written) std::cerr << "conveyor convert: wrote " << args.out << " before the signal stopped it\n";
    else std::cerr << "conveyor convert: " << written.error().message << "\n";
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  if (!written) {
    std::cerr << "conveyor convert: " << written.error().message << "\n";
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
