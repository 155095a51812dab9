// Loading a model by name: `--model` in every conveyor command.
//
//   path/to/file.gguf   GGUF v2/v3, architecture `llama`, with its tokenizer
//   path/to/file.bin    a llama2.c checkpoint (tokenizer from LoadOptions)
//   dummy:NAME          random weights of the shape in configs/models/NAME.toml
//   (empty)             the embedded default: a tiny random model with a byte tokenizer
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.hpp"
#include "model/status.hpp"
#include "model/tokenizer/tokenizer.hpp"
#include "model/weights.hpp"

namespace conveyor {

struct LoadOptions {
  std::string tokenizer_path;            // llama2.c tokenizer file for checkpoints; "" = none
  uint64_t seed = 0;                     // dummy weights
  std::vector<std::string> config_dirs;  // where dummy:NAME is looked up; empty = defaults
};

struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the model has none (ids only)
  std::vector<int32_t> eos_ids;                // generation ends on these unless ignore_eos
  std::string chat_template;                   // GGUF tokenizer.chat_template, or ""
  std::string source;                          // what was loaded, for logs
};

Expected<LoadedModel> load_model(std::string_view spec, const LoadOptions& options = {});

}  // namespace conveyor
