// Rotary position embedding (RoPE) applied to query and key heads in place.
//
// Pair i (0 <= i < rotary_dim / 2) of a head at position p turns by the angle
// p · freq[i], where freq[i] = theta^(-2i / rotary_dim) unless the model
// scales it (model/rope_scaling.hpp). Which two dimensions form pair i
// depends on the checkpoint's layout; dimensions past rotary_dim are left alone.
#pragma once

#include <cstdint>
#include <span>

namespace conveyor::kernels {

enum class RopeStyle : uint8_t {
  adjacent_pairs,  // (x[2i], x[2i + 1]): llama2.c, GGUF `llama`
  half_split,      // (x[i], x[i + rotary_dim / 2]): Hugging Face / GPT-NeoX
};

// Floats in a table for positions [0, n_positions).
inline int64_t rope_table_floats(int32_t rotary_dim, int32_t n_positions) {
  return int64_t(n_positions) * rotary_dim;
}

// table[p][i] = (cos, sin) of pair i's angle at position p, computed in double.
void rope_table(float theta, int32_t rotary_dim, int32_t n_positions,
                float* table);  // [n_positions][rotary_dim / 2][2]
// The same for given per-pair frequencies (radians per position), with cos
// and sin both multiplied by `scale` (YaRN's attention scaling).
void rope_table(std::span<const double> pair_freqs, double scale, int32_t n_positions,
                float* table);  // [n_positions][pair_freqs.size()][2]

// Rotates n_heads consecutive heads of each token row. Positions must be below
// the table's n_positions.
void rope_apply(float* x,  // [n_tokens, ldx]; head h at x[t * ldx + h * head_dim]
                int64_t ldx, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                int32_t rotary_dim, RopeStyle style,
                const int32_t* positions,  // [n_tokens]
                const float* table);       // [n_positions][rotary_dim / 2][2]

}  // namespace conveyor::kernels
