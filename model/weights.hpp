// Model weights in the compute type (float32), row-major.
//
// A matrix "[out, in]" holds `out` rows of `in` floats: y = W x reads one row
// per output. This is the layout of llama2.c checkpoints and of GGUF tensors
// (whose ne[0] is the row length), so loaders copy or convert without
// transposing.
#pragma once

#include <vector>

#include "model/config.hpp"

namespace conveyor {

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  std::vector<float> wq;         // [n_heads * head_dim, dim]
  std::vector<float> wk;         // [kv_dim, dim]
  std::vector<float> wv;         // [kv_dim, dim]
  std::vector<float> wo;         // [dim, n_heads * head_dim]
  std::vector<float> ffn_norm;   // [dim]
  std::vector<float> w1;         // gate [hidden_dim, dim]
  std::vector<float> w2;         // down [dim, hidden_dim]
  std::vector<float> w3;         // up   [hidden_dim, dim]
};

struct ModelWeights {
  std::vector<float> token_embedding;  // [vocab_size, dim]
  std::vector<LayerWeights> layers;    // [n_layers]
  std::vector<float> final_norm;       // [dim]
  std::vector<float> classifier;       // [vocab_size, dim]; empty when tied_embeddings
};

// True when every tensor has the size that `config` implies.
bool weights_match(const ModelConfig& config, const ModelWeights& weights);

// Random weights for `config`, a fixed function of `seed` (vLLM's "dummy" load
// format): norms are 1, matrices uniform in +-1/sqrt(in). For tests and benchmarks.
ModelWeights make_random_weights(const ModelConfig& config, uint64_t seed);

}  // namespace conveyor
