// Model weights, row-major: float32, or the matrices kept in their GGUF file's
// encoding (F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K).
//
// A matrix "[out, in]" holds `out` rows of `in` values: y = W x reads one row
// per output. This is the layout of llama2.c checkpoints and of GGUF tensors
// (whose ne[0] is the row length), so loaders copy or point at the file's
// bytes without transposing. Norm vectors are always float32.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/cpu/quant_formats.hpp"
#include "model/config.hpp"

namespace conveyor {

using kernels::WeightType;

struct WeightMatrix {
  WeightType type = WeightType::f32;
  std::vector<float> values;           // type f32: [out * in]
  std::span<const uint8_t> encoded;    // other types: out rows of ggml blocks
  std::shared_ptr<const void> storage;  // keeps `encoded` alive (the mapped file)
  bool file_mapped = false;             // `encoded` lies in a read-only file mapping

  // Values (f32) or encoded values (the element count the bytes hold).
  size_t elements(int64_t in) const;
  bool empty() const { return values.empty() && encoded.empty(); }
  // Bytes of the weights, as stored.
  size_t bytes() const {
    return type == WeightType::f32 ? values.size() * sizeof(float) : encoded.size();
  }
  // Row `row` of a matrix with `in` columns, decoded to float.
  void decode_row(int64_t row, int64_t in, float* out) const;
  // Once the matrix has been copied elsewhere (repacked), drops the pages of
  // a file mapping that only it covers from the process's resident memory;
  // the bytes stay valid and are read again from the file if used.
  void release_pages() const;
};

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  WeightMatrix wq;               // [n_heads * head_dim, dim]
  WeightMatrix wk;               // [kv_dim, dim]
  WeightMatrix wv;               // [kv_dim, dim]
  WeightMatrix wo;               // [dim, n_heads * head_dim]
  std::vector<float> ffn_norm;   // [dim]
  WeightMatrix w1;               // gate [hidden_dim, dim]
  WeightMatrix w2;               // down [dim, hidden_dim]
  WeightMatrix w3;               // up   [hidden_dim, dim]
  std::vector<float> bq, bk, bv;  // [q_dim], [kv_dim], [kv_dim] when config.qkv_bias, else empty
  std::vector<float> q_norm, k_norm;  // [head_dim] each when config.qk_norm, else empty
};

struct ModelWeights {
  WeightMatrix token_embedding;     // [vocab_size, dim]
  std::vector<LayerWeights> layers;  // [n_layers]
  std::vector<float> final_norm;     // [dim]
  WeightMatrix classifier;           // [vocab_size, dim]; empty when tied_embeddings
  std::vector<float> rope_freq_factors;  // [rotary_dim / 2] divisors of each pair's frequency
                                         // (Llama 3.1), or empty
};

// Every matrix of the model: the embedding, the classifier (empty when tied),
// then each layer's wq, wk, wv, wo, w1, w2, w3.
std::vector<const WeightMatrix*> weight_matrices(const ModelWeights& w);

// True when every tensor has the size that `config` implies.
bool weights_match(const ModelConfig& config, const ModelWeights& weights);

// Which weights these are, as a hash of every tensor's type and size, the
// norms and biases whole, and three 4 KiB samples (start, middle, end) of
// each matrix's bytes: files of another quantization, or another training
// run of the same shape, differ, at the cost of reading a few pages of each
// matrix. (A router refuses a node whose fingerprint is not its own.)
uint64_t weights_fingerprint(const ModelWeights& weights);

// Random weights for `config`, a fixed function of `seed` (vLLM's "dummy" load
// format): norms are 1, matrices uniform in +-1/sqrt(in). For tests and benchmarks.
ModelWeights make_random_weights(const ModelConfig& config, uint64_t seed);

}  // namespace conveyor
