// `conveyor generate`: one prompt through the model runtime, text (or ids) out.
//
// This drives the runtime directly: one sequence, a KV cache just big enough
// for it (of --kv-cache-dtype; its size goes to stderr), prefill in chunks and
// then one decode step per token.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "actors/backend.hpp"
#include "actors/kv_capacity.hpp"
#include "model/batch.hpp"
#include "model/formats/loader.hpp"
#include "model/forward/transformer.hpp"
#include "model/kv_cache.hpp"
#include "model/sampling/sampler.hpp"
#include "model/tokenizer/detokenizer.hpp"
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

// "1,2,3" -> {1, 2, 3}; every id must be in [0, vocab_size).
Expected<std::vector<int32_t>> parse_ids(const std::string& text, int32_t vocab_size) {
  std::vector<int32_t> ids;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    while (p < end && (*p == ' ' || *p == ',')) ++p;
    if (p == end) break;
    int32_t id = 0;
    auto [next, ec] = std::from_chars(p, end, id);
    if (ec != std::errc() || (next < end && *next != ',' && *next != ' '))
      return make_error(Errc::invalid_argument,
                        "--prompt-ids: expected comma-separated integers, got '" + text + "'");
    if (id < 0 || id >= vocab_size)
      return make_error(Errc::invalid_argument, "--prompt-ids: token id " + std::to_string(id) +
                                                    " is outside the vocabulary [0, " +
                                                    std::to_string(vocab_size) + ")");
    ids.push_back(id);
    p = next;
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
  if (!device) return usage_error(device.error().message);
  if (Status s = check_device(*device); !s) return usage_error(s.error().message);
  if (device->kind != DeviceKind::cpu)  // generate drives the CPU Transformer itself
    return usage_error("--device " + args.device + ": conveyor generate runs on the CPU only (the CUDA "
                       "runner is not built yet)");
  const std::optional<KvDtype> kv_dtype =
      args.kv_cache_dtype == "auto" ? std::optional(default_kv_dtype()) : parse_kv_dtype(args.kv_cache_dtype);
  if (!kv_dtype)
    return usage_error("--kv-cache-dtype: must be f32, f16, bf16 or auto, not '" + args.kv_cache_dtype + "'");
  LoadOptions options;
  options.tokenizer_path = args.tokenizer;
  auto loaded = load_model(args.model, options);
  if (!loaded) {
    std::cerr << "conveyor generate: " << loaded.error().message << "\n";
    return loaded.error().code == Errc::io_error || loaded.error().code == Errc::invalid_argument
               ? kExitUsage
               : kExitFailure;
  }
  LoadedModel model = std::move(loaded).value();
  const ModelConfig config = model.config;

  std::vector<int32_t> prompt;
  if (args.prompt_ids) {
    auto ids = parse_ids(*args.prompt_ids, config.vocab_size);
    if (!ids) return usage_error(ids.error().message);
    prompt = std::move(ids).value();
  } else {
    if (!model.tokenizer)
      return usage_error("model '" + model.source +
                         "' has no tokenizer: give --prompt-ids, or --tokenizer FILE");
    prompt = model.tokenizer->encode(*args.prompt, /*add_bos=*/true);
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
  KvCache kv(KvCacheShape::for_model(config, kBlockSize, n_blocks, *kv_dtype));
  std::cerr << "conveyor generate: KV cache " << int64_t(n_blocks) * kBlockSize << " tokens in " << n_blocks
            << " blocks of " << kBlockSize << ", " << to_string(*kv_dtype) << ", "
            << format_bytes(int64_t(kv.shape().block_bytes()) * n_blocks) << "\n";
  std::vector<int32_t> block_table(n_blocks);
  for (int32_t b = 0; b < n_blocks; ++b) block_table[b] = b;

  Transformer transformer(config, std::move(model.weights), args.threads);
  Sampler sampler(params, prompt);
  std::optional<IncrementalDetokenizer> detok;
  if (model.tokenizer && !args.ids_only) detok.emplace(*model.tokenizer);

  ForwardBatch batch;
  std::vector<float> logits;
  // Prefill in chunks; only the last chunk asks for logits.
  for (int32_t pos = 0; pos < int32_t(prompt.size()); pos += kPrefillChunk) {
    const int32_t n = std::min<int32_t>(kPrefillChunk, int32_t(prompt.size()) - pos);
    const bool last = pos + n == int32_t(prompt.size());
    batch.clear();
    batch.add_sequence(std::span(prompt).subspan(pos, n), pos,
                       std::span(block_table).first((pos + n + kBlockSize - 1) / kBlockSize), last);
    transformer.forward(batch, kv, logits);
  }

  std::vector<int32_t> generated;
  int32_t pos = int32_t(prompt.size());
  while (int32_t(generated.size()) < args.max_tokens) {
    const SampleResult r = sampler.sample(logits);
    if (sampler.is_stop_token(r.token, model.eos_ids)) break;
    generated.push_back(r.token);
    if (detok) {
      std::cout << detok->push(r.token) << std::flush;
    } else {
      std::cout << (generated.size() > 1 ? " " : "") << r.token << std::flush;
    }
    if (pos + 1 >= total) break;  // context full
    batch.clear();
    const int32_t token = r.token;
    batch.add_sequence(std::span(&token, 1), pos,
                       std::span(block_table).first(pos / kBlockSize + 1), true);
    transformer.forward(batch, kv, logits);
    ++pos;
  }
  if (detok) std::cout << detok->flush();
  std::cout << "\n";
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
  cmd->add_option("--temperature", args->temperature, "0 for greedy")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", args->top_k, "keep the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-p", args->min_p, "drop tokens below min-p times the top probability")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", args->seed, "random seed (same seed, same output)");
  cmd->add_flag("--ids", args->ids_only, "print the generated token ids instead of text");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop at the end-of-sequence token");
  cmd->add_option("--threads", args->threads, "compute threads (0: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", args->device, "cpu | cuda | cuda:N: the backend (default cpu)");
  cmd->add_option("--kv-cache-dtype", args->kv_cache_dtype,
                  "f32 | f16 | bf16 | auto: the KV cache's element type (default auto: bf16 where the CPU "
                  "has AVX512-BF16, else f16)");
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
