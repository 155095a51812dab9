// llama2.c checkpoints (Karpathy's run.c "legacy" format, version 0).
//
// Seven little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
// vocab_size, seq_len), then float32 weights: token embedding, attention
// norms, wq, wk, wv, wo, ffn norms, w1, w2, w3 (each for all layers), final
// norm, two legacy RoPE tables of seq_len * head_dim / 2 floats (skipped), and,
// only when vocab_size is negative, the classifier. The file size must be
// exactly what the header implies. RoPE: adjacent pairs, theta 10000; RMSNorm
// epsilon 1e-5.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "model/formats/loader.hpp"
#include "base/status.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor {

// The weights and config of a checkpoint held in memory; no tokenizer.
// eos_ids are {1, 2} (run.c stops on BOS = 1; 2 is </s>). `name` is used in
// errors and as the model name.
Expected<LoadedModel> parse_llama2c(std::span<const uint8_t> bytes, const std::string& name);

// Reads the checkpoint at `path`; when `tokenizer_path` is not empty, also the
// llama2.c tokenizer file there (vocabulary and tokenizer).
Expected<LoadedModel> load_llama2c(const std::string& path, const std::string& tokenizer_path);

// The vocabulary in a llama2.c tokenizer file, in SentencePiece spelling ("▁"
// for space, "<s>"/"</s>" for ids 1 and 2), with unk 0, BOS 1, EOS 2.
Expected<Vocabulary> parse_llama2c_vocabulary(std::span<const uint8_t> bytes, int32_t vocab_size,
                                              const std::string& name);

// Reads the tokenizer file at `path` for a model of `vocab_size` tokens and
// sets model.tokenizer and model.vocabulary.
Status attach_llama2c_tokenizer(LoadedModel& model, const std::string& path);

}  // namespace conveyor
