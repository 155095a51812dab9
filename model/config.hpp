// The shape of a Llama-family model, as every loader fills it in.
//
// The families conveyor runs differ from Llama 2 only in the few switches
// below (which the GGUF loader sets from one table per architecture): biases
// on the Q/K/V products (Qwen 2), RMS norms on each query and key head (Qwen
// 3), the head size, the RoPE pairing and how RoPE stretches positions. Llama
// 3.1's per-pair frequency factors are a tensor (ModelWeights::rope_freq_factors).
#pragma once

#include <cstdint>
#include <string>

namespace conveyor {

// How RoPE pairs the dimensions of a head.
enum class RopeLayout : uint8_t {
  adjacent_pairs,  // rotate (x[2i], x[2i+1]): llama2.c, GGUF architecture `llama`
  half_split,      // rotate (x[i], x[i + rope_dim/2]): Hugging Face / GPT-NeoX layout
};

// How RoPE stretches positions past the trained context (GGUF rope.scaling.type).
enum class RopeScaling : uint8_t {
  none,
  linear,  // every pair's angle divided by rope_scaling_factor
  yarn,    // YaRN: low-frequency pairs interpolated, high-frequency ones kept, with a ramp
};

struct ModelConfig {
  std::string name;                     // for logs and /v1/models
  std::string architecture = "llama";  // GGUF general.architecture: llama, qwen2, qwen3
  int32_t dim = 0;             // embedding width
  int32_t hidden_dim = 0;      // feed-forward width
  int32_t n_layers = 0;
  int32_t n_heads = 0;         // query heads
  int32_t n_kv_heads = 0;      // key/value heads (grouped-query attention when < n_heads)
  int32_t vocab_size = 0;
  int32_t context_length = 0;  // longest sequence the model was trained for
  int32_t head_size = 0;       // width of each query/key/value head; 0 means dim / n_heads
  int32_t rope_dim = 0;        // dimensions of each head that RoPE rotates; 0 means head_dim()
  float rope_theta = 10000.0f;
  RopeLayout rope_layout = RopeLayout::adjacent_pairs;
  RopeScaling rope_scaling = RopeScaling::none;
  float rope_scaling_factor = 1.0f;    // linear, yarn: how many times the context is stretched
  int32_t rope_original_context = 0;   // yarn: the context length before stretching
  float yarn_beta_fast = 32.0f;        // yarn: ramp ends, in rotations over the original context
  float yarn_beta_slow = 1.0f;
  float rope_attn_factor = 1.0f;       // yarn: scale on cos and sin (times YaRN's own mscale)
  float rms_eps = 1e-5f;
  bool tied_embeddings = true;  // the classifier is the token embedding
  bool qkv_bias = false;        // the Q, K and V products add a bias (qwen2)
  bool qk_norm = false;         // each query and key head is RMS-normalized before RoPE (qwen3)

  int32_t head_dim() const { return head_size > 0 ? head_size : n_heads > 0 ? dim / n_heads : 0; }
  int32_t q_dim() const { return n_heads * head_dim(); }
  int32_t kv_dim() const { return n_kv_heads * head_dim(); }
  int32_t rotary_dim() const { return rope_dim > 0 ? rope_dim : head_dim(); }
  // Number of float parameters, counting a tied classifier once.
  int64_t parameter_count() const;
};

}  // namespace conveyor
