// The arithmetic of the CUDA sampling kernels (sampling.cu), mirroring the
// CPU sampler (model/sampling/sampler.hpp, filters.hpp) where it can:
//   - penalties: the same operations in the same order (repetition, then
//     frequency and presence), so the same floats;
//   - greedy: the largest logit, ties to the lower id, NaN never chosen
//     unless all are NaN (then id 0): the same id;
//   - temperature and min-p: weights exp_nonpositive((l - max) / T), the
//     CPU's Cephes polynomial; identical when compiled without FMA
//     contraction (sampling.cu is built with --fmad=false for this);
//   - the draw over the whole row: a uniform in [0, 1) drawn on the host
//     from the sequence's own generator (the CPU Sampler's), and the same
//     walk over weights >= min_p. The running sums are doubles added in
//     another order than the CPU's, so a draw that falls within rounding
//     (about 1e-16 of the total) of a boundary between two tokens may pick
//     the neighbour.
// Not mirrored, and not on the device yet: top-k and top-p. The CPU's
// candidate order after a top-p cut depends on its selection algorithm, so
// a device version would draw the same distribution but not the same ids.
#pragma once

#include <cmath>

#include "kernels/cuda/hd.hpp"

namespace conveyor::kernels::cuda {

// model/sampling/filters.cpp's exp_nonpositive, operation for operation.
CONVEYOR_HD float exp_nonpositive(float x) {
  const float clamped = x >= -87.3f ? x : -87.3f;
  const float n = floorf(clamped * 1.44269504f + 0.5f);
  const float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const float scale = bits_float(uint32_t(int32_t(n) + 127) << 23);
  return x >= -87.3f ? y * scale : 0.0f;  // NaN fails the test too
}

CONVEYOR_HD float repetition_penalized(float logit, float penalty) {
  return logit > 0.0f ? logit / penalty : logit * penalty;
}

CONVEYOR_HD float count_penalized(float logit, int32_t count, float frequency, float presence) {
  return logit - (frequency * float(count) + presence);
}

// Whether (a, ia) ranks above (b, ib) for greedy sampling: larger logit,
// then lower id; NaN below everything, -inf included.
CONVEYOR_HD bool argmax_better(float a, int32_t ia, float b, int32_t ib) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return a_nan == b_nan ? ia < ib : b_nan;
  return a > b || (a == b && ia < ib);
}

// The max logit ignoring NaN (max_logit): NaN as -inf.
CONVEYOR_HD float logit_or_neg_inf(float x) { return x == x ? x : bits_float(0xff800000u); }

// A token's draw weight, 0 where min_p drops it (draw_row's `w >= min_weight`).
CONVEYOR_HD float draw_weight(float logit, float max, float inv_temperature, float min_p) {
  const float w = exp_nonpositive((logit - max) * inv_temperature);
  return w >= min_p ? w : 0.0f;
}

// The draw: `chunk_totals` holds the weight of each run of `chunk` tokens
// (the last may be shorter), `weight(i)` gives token i's weight. Returns the
// first token where the running sum passes uniform · total, skipping whole
// runs below it, as draw_row does with its blocks of 64.
template <class Weight>
CONVEYOR_HD int32_t draw_from_chunks(const double* chunk_totals, int32_t n_chunks, int32_t chunk,
                                     int32_t vocab, double uniform, Weight weight) {
  double total = 0.0;
  for (int32_t c = 0; c < n_chunks; ++c) total += chunk_totals[c];
  const double target = uniform * total;
  double cumulative = 0.0;
  int32_t last_positive = 0;
  for (int32_t c = 0; c < n_chunks; ++c) {
    const double block = chunk_totals[c];
    if (block <= 0.0) continue;
    const int32_t begin = c * chunk, end = begin + chunk < vocab ? begin + chunk : vocab;
    if (cumulative + block <= target && end < vocab) {
      cumulative += block;
      continue;
    }
    for (int32_t i = begin; i < end; ++i) {
      const float w = weight(i);
      if (!(w > 0.0f)) continue;
      cumulative += w;
      last_positive = i;
      if (target < cumulative) return i;
    }
  }
  return last_positive;  // rounding left the target at the very top
}

}  // namespace conveyor::kernels::cuda
