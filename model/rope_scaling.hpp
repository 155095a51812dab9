// The per-pair RoPE frequencies of a model: the base theta^(-2i / rotary_dim),
// divided by Llama 3.1's frequency factors when the file has them, then
// stretched as the config's rope_scaling says (following llama.cpp's ggml_rope
// with its YaRN correction dimensions, so the angles match llama.cpp's):
//   linear  freq_i / factor
//   yarn    freq_i · ((1 − r_i) / factor + r_i), where r_i ramps from 1 for
//           pairs that turn more than beta_fast times over the original
//           context down to 0 for pairs that turn fewer than beta_slow times;
//           cos and sin are scaled by attn_factor · (1 + 0.1 ln factor).
#pragma once

#include <span>
#include <vector>

#include "model/config.hpp"

namespace conveyor {

struct RopeFrequencies {
  std::vector<double> pair_freqs;  // [rotary_dim / 2] radians per position
  double scale = 1.0;              // on cos and sin
};

// `freq_factors` is empty or holds rotary_dim / 2 positive divisors.
RopeFrequencies rope_frequencies(const ModelConfig& config, std::span<const float> freq_factors);

}  // namespace conveyor
