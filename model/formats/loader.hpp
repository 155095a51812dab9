// Loading a model by name: `--model` in every conveyor command.
//
//   path/to/file.gguf   GGUF v2/v3, architecture `llama`, with its tokenizer
//   path/to/file.bin    a llama2.c checkpoint (tokenizer from LoadOptions)
//   dummy:NAME          random weights of the shape in configs/models/NAME.toml
//   (empty)             the embedded default: a tiny random model with a byte tokenizer
//
// A path is read as GGUF when its contents start with the GGUF magic or its
// name ends in ".gguf"; any other file is read as a llama2.c checkpoint.
// Every loader checks the weights against the config (weights_match holds for
// the result) and returns an Error naming the file and the problem for
// corrupt, truncated or unsupported input. GGUF matrices keep their file's
// encoding (F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) unless
// LoadOptions::dequantize is set; the mapped file stays open while the
// weights point into it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.hpp"
#include "base/status.hpp"
#include "model/tokenizer/tokenizer.hpp"
#include "model/weights.hpp"

namespace conveyor {

struct LoadOptions {
  // A llama2.c tokenizer file, for llama2.c checkpoints and dummy models (it
  // replaces the dummy config's tokenizer); "" = none. GGUF files carry their own.
  std::string tokenizer_path;
  uint64_t seed = 0;  // dummy weights (the embedded default always uses its own fixed seed)
  // Where dummy:NAME finds NAME.toml, searched in order before the defaults:
  // $CONVEYOR_CONFIG_DIR, then the source tree's configs/models, then the installed ones.
  std::vector<std::string> config_dirs;
  // Decode every GGUF matrix to float32 (what `conveyor convert` reads)
  // instead of keeping the file's encoding for the forward pass.
  bool dequantize = false;
};

struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the model has none (ids only)
  std::vector<int32_t> eos_ids;                // generation ends on these unless ignore_eos
  std::string chat_template;                   // GGUF tokenizer.chat_template, or ""
  std::string source;                          // what was loaded, for logs
  // The vocabulary the tokenizer was built from (GGUF, llama2.c tokenizer
  // files), or for the byte tokenizer an equivalent one (byte_vocabulary in
  // dummy.hpp); what write_gguf stores. nullopt when there is no tokenizer.
  std::optional<Vocabulary> vocabulary;
  // How `vocabulary` tokenizes, named as GGUF's tokenizer.ggml.model does:
  // "llama" (SentencePiece) or "gpt2" (byte-level BPE). "" = "gpt2" when the
  // vocabulary has merges, else "llama".
  std::string tokenizer_model;
};

Expected<LoadedModel> load_model(std::string_view spec, const LoadOptions& options = {});

}  // namespace conveyor
