// From a parsed GGUF file of a Llama-family architecture to a LoadedModel.
//
// Architectures: `llama` (Llama 2 and 3.x, Mistral, SmolLM, ...), `qwen2`
// (Qwen 2 / 2.5: Q/K/V biases) and `qwen3` (dense Qwen 3: RMS norms on each
// query and key head, heads wider than dim / n_heads). One table in
// gguf_llama.cpp says how each differs; the keys are read under the
// architecture's prefix: context_length, embedding_length,
// feed_forward_length, block_count, attention.head_count, head_count_kv
// [default head_count], attention.key_length/value_length [dim / n_heads],
// rope.freq_base [10000], rope.dimension_count [head size],
// attention.layer_norm_rms_epsilon [1e-5], and rope.scaling.type (none,
// linear, yarn) with its factor, original_context_length, attn_factor and
// yarn_beta_fast/slow. Llama 3.1's rope_freqs.weight is read as per-pair
// frequency divisors. Every tensor's shape is checked against the metadata.
// The classifier is tied to the token embedding when output.weight is
// absent. llama.cpp stores Q and K of `llama` models permuted for RoPE on
// adjacent pairs, and those of qwen2/qwen3 unpermuted (half-split pairs); the
// config says which, and the weights are used as stored.
//
// Refused as unsupported: other architectures, mixture-of-experts models,
// other RoPE scaling types, key and value heads of different sizes, and
// tokenizer models other than "llama" (SentencePiece) and "gpt2" (byte-level BPE).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/formats/gguf_reader.hpp"
#include "model/formats/loader.hpp"
#include "base/status.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor {

// The model a GGUF file of architecture `llama` holds. Matrices stored as F16,
// BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K keep their encoding and point into the
// file's storage (which the weights then keep alive), unless `dequantize`
// asks for float32.
Expected<LoadedModel> llama_from_gguf(const GgufFile& file, bool dequantize = false);

// The tokenizer a GGUF file describes (tokenizer.ggml.*): its vocabulary (with
// tokenizer.ggml.pre, the BPE pre-tokenizer; an unknown name is refused as
// unsupported), the tokenizer built from it, the ids that end generation and
// the chat template. eos_ids holds eos, eot and eom (those present), then the
// tokens llama.cpp treats as end of generation by their text (<|eot_id|>,
// <|eom_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, the
// fill-in-the-middle separators, ...). add_bos defaults to true for
// SentencePiece and for the pre-tokenizers that llama.cpp gives BOS (Llama 3).
// vocabulary and tokenizer are empty when tokenizer.ggml.model is absent,
// "none" or "no_vocab".
struct GgufTokenizer {
  std::string model;  // tokenizer.ggml.model: "llama", "gpt2", or "" for none
  std::optional<Vocabulary> vocabulary;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<int32_t> eos_ids;
  std::string chat_template;
};

Expected<GgufTokenizer> tokenizer_from_gguf(const GgufFile& file);

}  // namespace conveyor
