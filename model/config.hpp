// The shape of a Llama-architecture model, as every loader fills it in.
#pragma once

#include <cstdint>
#include <string>

namespace conveyor {

// How RoPE pairs the dimensions of a head.
enum class RopeLayout : uint8_t {
  adjacent_pairs,  // rotate (x[2i], x[2i+1]): llama2.c, GGUF architecture `llama`
  half_split,      // rotate (x[i], x[i + rope_dim/2]): Hugging Face / GPT-NeoX layout
};

struct ModelConfig {
  std::string name;            // for logs and /v1/models
  int32_t dim = 0;             // embedding width
  int32_t hidden_dim = 0;      // feed-forward width
  int32_t n_layers = 0;
  int32_t n_heads = 0;         // query heads
  int32_t n_kv_heads = 0;      // key/value heads (grouped-query attention when < n_heads)
  int32_t vocab_size = 0;
  int32_t context_length = 0;  // longest sequence the model was trained for
  int32_t rope_dim = 0;        // dimensions of each head that RoPE rotates; 0 means head_dim()
  float rope_theta = 10000.0f;
  RopeLayout rope_layout = RopeLayout::adjacent_pairs;
  float rms_eps = 1e-5f;
  bool tied_embeddings = true;  // the classifier is the token embedding

  int32_t head_dim() const { return n_heads > 0 ? dim / n_heads : 0; }
  int32_t kv_dim() const { return n_kv_heads * head_dim(); }
  int32_t rotary_dim() const { return rope_dim > 0 ? rope_dim : head_dim(); }
  // Number of float parameters, counting a tied classifier once.
  int64_t parameter_count() const;
};

}  // namespace conveyor
