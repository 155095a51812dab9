// `conveyor generate`: one prompt through the model runtime, text (or ids) out.
//
// This drives the backend of --device (backends/backend.hpp: the CPU's, or the
// CUDA runner) directly, without the engine's actors: one sequence, a KV
// cache just big enough for it (of --kv-cache-dtype; its size goes to
// stderr), prefill in chunks and then one decode step per token, each a
// StepPlan for the backend's StepRunner.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "engine/kv_capacity.hpp"
#include "model/batch.hpp"
#include "model/formats/loader.hpp"
#include "model/kv_cache.hpp"
#include "model/sampling/sampler.hpp"
#include "model/tokenizer/detokenizer.hpp"
#include "base/cli_checks.hpp"
#include "tools/conveyor/commands.hpp"

namespace conveyor::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string tokenizer;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;
  int32_t max_tokens = 64;
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;
  bool ids_only = false;
  bool ignore_eos = false;
  int threads = 0;
  std::string kv_cache_dtype = "auto";
  std::string device = "cpu";
};

constexpr int32_t kBlockSize = 16;
constexpr int32_t kPrefillChunk = 256;

// "1,2,3" (spaces around the commas allowed) -> {1, 2, 3}; every id must be
// in [0, vocab_size).
Expected<std::vector<int32_t>> parse_ids(const std::string& text, int32_t vocab_size) {
  std::vector<int32_t> ids;
  const auto malformed = [&] {
    return make_error(Errc::invalid_argument, "--prompt-ids: expected comma-separated integers, got '" + text + "'");
  };
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view item(text.data() + begin, end - begin);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int32_t id = 0;
    const auto [next, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || next != item.data() + item.size()) return malformed();
    if (id < 0 || id >= vocab_size)
      return make_error(Errc::invalid_argument, "--prompt-ids: token id " + std::to_string(id) +
                                                    " is outside the vocabulary [0, " +
                                                    std::to_string(vocab_size) + ")");
    ids.push_back(id);
    begin = end + 1;
  }
  if (ids.empty()) return make_error(Errc::invalid_argument, "--prompt-ids: no token ids given");
  return ids;
}

int usage_error(const std::string& message) {
  std::cerr << "conveyor generate: " << message << "\n";
  return kExitUsage;
}

int run_generate(const GenerateArgs& args) {
  auto device = parse_device(args.device);
  if (!device) return usage_error("--device: " + device.error().message);
  if (Status s = check_device(*device); !s) return usage_error(s.error().message);
  const auto kv_dtype = parse_kv_cache_dtype(args.kv_cache_dtype);
  if (!kv_dtype) return usage_error("--kv-cache-dtype: " + kv_dtype.error().message);
  LoadOptions options;
  options.tokenizer_path = args.tokenizer;
  auto loaded = load_model(args.model, options);
  if (!loaded) {
    std::cerr << "conveyor generate: " << loaded.error().message << "\n";
    return load_error_exit_code(loaded.error());
  }
  LoadedModel model = std::move(loaded).value();
  const ModelConfig config = model.config;
  const auto tokenizer = model.tokenizer;  // the backend takes the model
  const std::vector<int32_t> eos_ids = model.eos_ids;

  std::vector<int32_t> prompt;
  if (args.prompt_ids) {
    auto ids = parse_ids(*args.prompt_ids, config.vocab_size);
    if (!ids) return usage_error(ids.error().message);
    prompt = std::move(ids).value();
  } else {
    if (!tokenizer)
      return usage_error("model '" + model.source +
                         "' has no tokenizer: give --prompt-ids, or --tokenizer FILE");
    prompt = tokenizer->encode(*args.prompt, /*add_bos=*/true);
  }
  if (int32_t(prompt.size()) >= config.context_length)
    return usage_error("the prompt has " + std::to_string(prompt.size()) +
                       " tokens; the model's context is " + std::to_string(config.context_length));

  SamplingParams params;
  params.temperature = args.temperature;
  params.top_p = args.top_p;
  params.top_k = args.top_k;
  params.min_p = args.min_p;
  params.max_tokens = args.max_tokens;
  params.ignore_eos = args.ignore_eos;
  if (args.seed) {
    params.seed = *args.seed;
    params.has_seed = true;
  }
  if (Status s = validate(params, config.vocab_size); !s) return usage_error(s.error().message);

  const int32_t total =
      std::min<int32_t>(config.context_length, int32_t(prompt.size()) + args.max_tokens);
  const int32_t n_blocks = (total + kBlockSize - 1) / kBlockSize;
  // The device's backend, as `conveyor serve` builds it, for one sequence.
  EngineConfig engine;
  engine.device = *device;
  engine.block_size = kBlockSize;
  engine.kv_cache_tokens = int64_t(n_blocks) * kBlockSize;
  engine.kv_cache_dtype = *kv_dtype;
  engine.max_num_seqs = 1;
  engine.max_batched_tokens = kPrefillChunk;
  engine.threads = args.threads;
  auto backend = backend_factory(engine.device)(engine, std::move(model));
  if (!backend) {
    std::cerr << "conveyor generate: " << backend.error().message << "\n";
    return kExitFailure;
  }
  std::cerr << "conveyor generate: " << to_string(*device) << ", weights " << backend->weights_description
            << "; KV cache " << int64_t(n_blocks) * kBlockSize << " tokens in " << n_blocks << " blocks of "
            << kBlockSize << ", " << to_string(backend->kv_dtype) << ", " << format_bytes(backend->capacity.bytes)
            << "\n";
  std::vector<int32_t> block_table(n_blocks);
  for (int32_t b = 0; b < n_blocks; ++b) block_table[b] = b;

  StepRunner& runner = *backend->runner;
  const Sampler stops(params, {});  // only asked which tokens end the sequence
  std::optional<IncrementalDetokenizer> detok;
  if (tokenizer && !args.ids_only) detok.emplace(*tokenizer);

  constexpr seq_id kSeq = 1;
  uint64_t iteration = 0;
  // One step of the sequence: `tokens` at `pos`; the sample when `last`.
  auto step = [&](std::span<const int32_t> tokens, int32_t pos, bool last) {
    StepPlan plan;
    plan.iteration = iteration++;
    const int32_t end = pos + int32_t(tokens.size());
    plan.batch.add_sequence(tokens, pos, std::span(block_table).first((end + kBlockSize - 1) / kBlockSize), last,
                            int32_t(prompt.size()));
    plan.seq_ids.push_back(kSeq);
    if (pos == 0) {
      plan.new_samplers.emplace_back(kSeq, params);
      plan.new_sampler_prompts.push_back(prompt);
    }
    const StepResult r = runner.run(plan);
    return r.tokens.empty() ? -1 : r.tokens.front().result.token;
  };
  // Prefill in chunks; only the last chunk asks for a sample.
  int32_t token = -1;
  for (int32_t pos = 0; pos < int32_t(prompt.size()); pos += kPrefillChunk) {
    const int32_t n = std::min<int32_t>(kPrefillChunk, int32_t(prompt.size()) - pos);
    token = step(std::span(prompt).subspan(pos, n), pos, pos + n == int32_t(prompt.size()));
  }

  std::vector<int32_t> generated;
  bool context_full = false;
  int32_t pos = int32_t(prompt.size());
  while (int32_t(generated.size()) < args.max_tokens) {
    if (token < 0 || stops.is_stop_token(token, eos_ids)) break;
    generated.push_back(token);
    if (detok) {
      std::cout << detok->push(token) << std::flush;
    } else {
      std::cout << (generated.size() > 1 ? " " : "") << token << std::flush;
    }
    if (int32_t(generated.size()) == args.max_tokens) break;
    if (pos + 1 >= total) {
      context_full = true;
      break;
    }
    token = step(std::span(&token, 1), pos, true);
    ++pos;
  }
  if (detok) std::cout << detok->flush();
  std::cout << "\n";
  if (context_full)
    std::cerr << "conveyor generate: stopped after " << generated.size() << " tokens: the model's context of "
              << config.context_length << " tokens is full\n";
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate a completion for one prompt");
  cmd->add_option("--model", args->model,
                  "GGUF file, llama2.c checkpoint, or dummy:NAME (default: the embedded tiny model)");
  cmd->add_option("--tokenizer", args->tokenizer, "llama2.c tokenizer file (for llama2.c checkpoints)");
  auto* prompt = cmd->add_option("--prompt", args->prompt, "prompt text");
  auto* ids = cmd->add_option("--prompt-ids", args->prompt_ids, "prompt as token ids: 1,2,3");
  prompt->excludes(ids);
  ids->excludes(prompt);
  cmd->add_option("--max-tokens", args->max_tokens, "tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", args->temperature, "0 for greedy")->check(finite_range(0, 100));
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass")->check(finite_range(0, 1));
  cmd->add_option("--top-k", args->top_k, "keep the k most likely tokens (0: off)")
      ->check(CLI::Range(0, std::numeric_limits<int32_t>::max()));
  cmd->add_option("--min-p", args->min_p, "drop tokens below min-p times the top probability")
      ->check(finite_range(0, 1));
  cmd->add_option("--seed", args->seed, "random seed (same seed, same output)")->check(unsigned_integer());
  cmd->add_flag("--ids", args->ids_only, "print the generated token ids instead of text");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop at the end-of-sequence token");
  cmd->add_option("--threads", args->threads, "compute threads (0: all cores)")->check(CLI::Range(0, kMaxThreads));
  cmd->add_option("--device", args->device, "cpu | cuda | cuda:N: the backend (default cpu)");
  cmd->add_option("--kv-cache-dtype", args->kv_cache_dtype,
                  "f32 | f16 | bf16 | q8_0 | auto: the KV cache's element type (default auto: bf16 where "
                  "the CPU has AVX512-BF16, else f16)");
  cmd->callback([args, cmd, &exit_code] {
    if (!args->prompt && !args->prompt_ids) {
      exit_code = usage_error("give --prompt TEXT or --prompt-ids 1,2,3 (see --help)");
      return;
    }
    (void)cmd;
    exit_code = run_generate(*args);
  });
}

}  // namespace conveyor::cli
