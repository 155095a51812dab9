#include "model/formats/config_check.hpp"

#include <cmath>
#include <cstdint>

namespace conveyor {

namespace {

struct Limit {
  const char* name;
  int32_t value;
  int32_t max;
};

}  // namespace

Status check_config(const ModelConfig& c, const std::string& source) {
  auto fail = [&](const std::string& what) {
    return Status(make_error(Errc::bad_format, source + ": " + what));
  };
  const Limit limits[] = {
      {"dim", c.dim, 1 << 16},
      {"hidden_dim", c.hidden_dim, 1 << 20},
      {"n_layers", c.n_layers, 1 << 12},
      {"n_heads", c.n_heads, 1 << 12},
      {"n_kv_heads", c.n_kv_heads, 1 << 12},
      {"vocab_size", c.vocab_size, 1 << 24},
      {"context_length", c.context_length, 1 << 24},
  };
  for (const Limit& l : limits) {
    if (l.value <= 0 || l.value > l.max)
      return fail(std::string(l.name) + " " + std::to_string(l.value) + " is outside [1, " +
                  std::to_string(l.max) + "]");
  }
  if (c.head_size < 0 || c.head_size > (1 << 12))
    return fail("head size " + std::to_string(c.head_size) + " is outside [1, 4096]");
  if (c.head_size == 0 && c.dim % c.n_heads != 0)
    return fail("n_heads " + std::to_string(c.n_heads) + " does not divide dim " +
                std::to_string(c.dim));
  if (c.n_heads % c.n_kv_heads != 0)
    return fail("n_kv_heads " + std::to_string(c.n_kv_heads) + " does not divide n_heads " +
                std::to_string(c.n_heads));
  if (c.head_dim() % 2 != 0)
    return fail("head dimension " + std::to_string(c.head_dim()) + " is odd (RoPE needs pairs)");
  if (c.rope_dim < 0 || c.rope_dim > c.head_dim() || c.rope_dim % 2 != 0)
    return fail("RoPE dimension count " + std::to_string(c.rope_dim) +
                " must be even and at most the head dimension " + std::to_string(c.head_dim()));
  if (!std::isfinite(c.rope_theta) || c.rope_theta <= 0.0f)
    return fail("rope_theta " + std::to_string(c.rope_theta) + " must be positive");
  if (!std::isfinite(c.rope_scaling_factor) || c.rope_scaling_factor < 1.0f ||
      c.rope_scaling_factor > 1024.0f)
    return fail("RoPE scaling factor " + std::to_string(c.rope_scaling_factor) +
                " must be in [1, 1024]");
  if (c.rope_scaling == RopeScaling::yarn &&
      (c.rope_original_context <= 0 || !std::isfinite(c.yarn_beta_fast) ||
       !std::isfinite(c.yarn_beta_slow) || c.yarn_beta_fast <= 0 || c.yarn_beta_slow <= 0 ||
       !std::isfinite(c.rope_attn_factor) || c.rope_attn_factor <= 0))
    return fail("YaRN needs a positive original context length, betas and attention factor");
  if (!std::isfinite(c.rms_eps) || c.rms_eps <= 0.0f || c.rms_eps >= 1.0f)
    return fail("rms_eps " + std::to_string(c.rms_eps) + " must be in (0, 1)");
  return Status::ok();
}

}  // namespace conveyor
