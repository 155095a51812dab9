// sample_kernel (kernels/cuda/sampling.cu) for one row on one host thread,
// from the same sampling_math.hpp functions: the math test's model of the
// device, and the CUDA emulator's sample_rows (tests/cuda_emulator).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cuda/sampling_math.hpp"

namespace conveyor::kernels::cuda {

// select_cut's collective operations on one thread: what sampling.cu's
// BlockRow computes with a block of threads.
struct HostRow {
  const float* l;
  int32_t vocab;
  uint64_t bins[256] = {};

  template <class Weight>
  const uint64_t* histogram(uint32_t prefix, uint32_t mask, int shift, Cut within, Weight weight) {
    std::fill(std::begin(bins), std::end(bins), 0);
    for (int32_t i = 0; i < vocab; ++i) {
      const float x = l[i];
      if (!kept(x, i, within) || (rank_key(x) & mask) != prefix) continue;
      bins[(rank_key(x) >> shift) & 255u] += weight(x);
    }
    return bins;
  }
  template <class Weight>
  int32_t tie_id(uint32_t key, Cut within, uint64_t before, uint64_t target, Weight weight) {
    return first_reaching(0, vocab, before, target, [&](int32_t i) -> uint64_t {
      const float x = l[i];
      return kept(x, i, within) && rank_key(x) == key ? weight(x) : 0;
    });
  }
};

// top-k then top-p as sample_kernel cuts them.
inline Cut device_cut(const float* l, int32_t vocab, int32_t top_k, float top_p, float max, float inv_t) {
  HostRow row{l, vocab};
  Cut cut;
  if (top_k > 0 && top_k < vocab)
    cut = select_cut(row, cut, [](float) { return uint64_t(1); }, [=](uint64_t) { return uint64_t(top_k); });
  if (top_p < 1.0f)
    cut = select_cut(row, cut, [=](float x) { return mass_weight(x, max, inv_t); },
                     [=](uint64_t total) { return mass_target(top_p, total); });
  return cut;
}
inline Cut device_cut(const std::vector<float>& l, int32_t top_k, float top_p, float max, float inv_t) {
  return device_cut(l.data(), int32_t(l.size()), top_k, top_p, max, inv_t);
}

// sample_kernel's token for one row: greedy below kGreedyTemperature (or
// when no logit is finite), else the draw with uniform `u` among the tokens
// top-k and top-p keep whose weight passes min-p, summed in 256 chunks as
// the kernel's threads sum them.
inline int32_t host_sample_row(const float* l, int32_t vocab, float temperature, float min_p, int32_t top_k,
                               float top_p, double u) {
  constexpr float kGreedy = 1e-5f;  // model/sampling/sampler.hpp's kGreedyTemperature
  int32_t best = 0;
  float max = logit_or_neg_inf(l[0]);
  for (int32_t i = 1; i < vocab; ++i) {
    if (argmax_better(l[i], i, l[best], best)) best = i;
    max = std::max(max, logit_or_neg_inf(l[i]));
  }
  if (temperature < kGreedy || !std::isfinite(max)) return best;
  const float inv_t = 1.0f / temperature;
  const Cut cut = device_cut(l, vocab, top_k, top_p, max, inv_t);
  auto weight = [&](int32_t i) { return kept(l[i], i, cut) ? draw_weight(l[i], max, inv_t, min_p) : 0.0f; };
  constexpr int32_t kThreads = 256;
  const int32_t chunk = (vocab + kThreads - 1) / kThreads;
  double totals[kThreads] = {};
  for (int32_t c = 0; c < kThreads; ++c)
    for (int32_t i = c * chunk; i < std::min(vocab, (c + 1) * chunk); ++i) totals[c] += weight(i);
  return draw_from_chunks(totals, kThreads, chunk, vocab, u, weight);
}

}  // namespace conveyor::kernels::cuda
