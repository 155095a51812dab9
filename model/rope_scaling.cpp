#include "model/rope_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace conveyor {
namespace {

// The pair index whose wavelength fits `rotations` times into the original
// context (ggml_rope_yarn_corr_dim).
double yarn_corr_dim(int32_t rotary_dim, int32_t original_context, double rotations, double base) {
  return rotary_dim * std::log(original_context / (rotations * 2 * std::numbers::pi)) /
         (2 * std::log(base));
}

}  // namespace

RopeFrequencies rope_frequencies(const ModelConfig& c, std::span<const float> freq_factors) {
  const int32_t rot = c.rotary_dim(), half = rot / 2;
  RopeFrequencies out;
  out.pair_freqs.resize(size_t(half));
  for (int32_t i = 0; i < half; ++i) {
    double f = std::pow(double(c.rope_theta), -2.0 * i / rot);
    if (!freq_factors.empty()) f /= double(freq_factors[size_t(i)]);
    out.pair_freqs[size_t(i)] = f;
  }
  const double freq_scale = 1.0 / double(c.rope_scaling_factor);
  switch (c.rope_scaling) {
    case RopeScaling::none:
      break;
    case RopeScaling::linear:
      for (double& f : out.pair_freqs) f *= freq_scale;
      break;
    case RopeScaling::yarn: {
      const double low = std::max(0.0, std::floor(yarn_corr_dim(rot, c.rope_original_context,
                                                                 c.yarn_beta_fast, c.rope_theta)));
      const double high = std::min(double(rot - 1), std::ceil(yarn_corr_dim(
                                                         rot, c.rope_original_context,
                                                         c.yarn_beta_slow, c.rope_theta)));
      for (int32_t i = 0; i < half; ++i) {
        const double y = (i - low) / std::max(0.001, high - low);
        const double ramp = 1.0 - std::clamp(y, 0.0, 1.0);  // 1: keep (extrapolate), 0: interpolate
        double& f = out.pair_freqs[size_t(i)];
        f = f * freq_scale * (1.0 - ramp) + f * ramp;
      }
      out.scale = double(c.rope_attn_factor) * (1.0 + 0.1 * std::log(1.0 / freq_scale));
      break;
    }
  }
  return out;
}

}  // namespace conveyor
