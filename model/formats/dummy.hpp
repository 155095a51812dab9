// Models that need no file: random weights of a configured shape
// (`dummy:NAME`), and the embedded default, compiled in.
//
// A dummy config is a TOML file NAME.toml:
//   dim, hidden_dim, n_layers, n_heads, vocab_size, context_length  (required integers)
//   n_kv_heads      integer, default n_heads
//   rope_theta      float, default 10000
//   rms_eps         float, default 1e-5
//   tied_embeddings bool, default true
//   tokenizer       "bytes" (needs vocab_size >= 258) or "none" (default)
//   name            string, default NAME
// Unknown keys are errors (they are usually typos).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/formats/loader.hpp"
#include "base/status.hpp"

namespace conveyor {

enum class DummyTokenizer { none, bytes };

struct DummyConfig {
  ModelConfig model;
  DummyTokenizer tokenizer = DummyTokenizer::none;
};

// Parses a dummy config's TOML text; errors name `source` and the field.
Expected<DummyConfig> parse_dummy_config(std::string_view toml_text, const std::string& source,
                                         const std::string& default_name);

// The directories dummy:NAME searches, in order: options.config_dirs, then
// $CONVEYOR_CONFIG_DIR, then <source tree>/configs/models, then the installed
// ones: share/conveyor/configs/models beside the program's bin/, then under
// the prefix the build was configured with.
std::vector<std::string> dummy_config_dirs(const LoadOptions& options);

// dummy:NAME: NAME must be a plain file name (letters, digits, '-', '_', '.',
// not starting with '.'); invalid_argument otherwise and when no NAME.toml is
// found (the message lists the directories searched). Weights are
// make_random_weights(config, options.seed); LoadOptions::tokenizer_path, when
// set, replaces the config's tokenizer.
Expected<LoadedModel> load_dummy(std::string_view name, const LoadOptions& options);

// The embedded default "conveyor-tiny": dim 64, hidden 172, 4 layers, 8 heads,
// 4 KV heads, context 512, vocab 258, the byte tokenizer (BOS 256, EOS 257),
// weights from a fixed seed; eos_ids {257}.
LoadedModel embedded_default_model();

// A byte-level BPE ("gpt2") vocabulary equivalent to the byte tokenizer: id b
// < 256 is GPT-2's printable stand-in for byte b, 256 is <s> (BOS), 257 </s>
// (EOS), then unused "<extra_N>" pieces up to `vocab_size` (>= 258); no
// merges, so every byte stays one token. It is what byte-tokenizer models carry
// as LoadedModel::vocabulary (tokenizer_model "gpt2"), so write_gguf stores a
// tokenizer that turns text into the same ids.
Vocabulary byte_vocabulary(int32_t vocab_size);

}  // namespace conveyor
