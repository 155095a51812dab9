#include "engine/step_cost.hpp"

#include <algorithm>
#include <cmath>

namespace conveyor {

void StepCostModel::observe(int32_t decode, int32_t prefill, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds) || decode + prefill <= 0) return;
  const double d = decode, p = prefill;
  if (prefill == 0) {
    w_ = w_ * decay_ + 1;
    sd_ = sd_ * decay_ + d;
    st_ = st_ * decay_ + seconds;
    sdd_ = sdd_ * decay_ + d * d;
    sdt_ = sdt_ * decay_ + d * seconds;
    return;
  }
  spp_ = spp_ * decay_ + p * p;
  spr_ = spr_ * decay_ + p * (seconds - base(decode));
}

double StepCostModel::base(int32_t decode) const {
  if (w_ <= 0) return kPriorBase + kPriorDecode * decode;
  const double mean_d = sd_ / w_, mean_t = st_ / w_;
  const double var = sdd_ / w_ - mean_d * mean_d;
  // One batch size seen so far (or nearly): a flat line through its mean,
  // with the prior's slope so that other sizes are not free.
  double slope = kPriorDecode;
  if (var > 0.25) slope = std::max(0.0, (sdt_ / w_ - mean_d * mean_t) / var);
  return std::max(0.0, mean_t + slope * (decode - mean_d));
}

double StepCostModel::prefill_seconds_per_token() const {
  if (spp_ <= 0) return kPriorPrefill;
  return std::max(spr_ / spp_, 1e-7);  // a prefill token is never free
}

double StepCostModel::predict(int32_t decode, int32_t prefill) const {
  return base(decode) + prefill_seconds_per_token() * prefill;
}

int32_t StepCostModel::prefill_allowance(int32_t decode, double target, int32_t floor) const {
  const double room = (target - base(decode)) / prefill_seconds_per_token();
  if (!(room > floor)) return floor;
  return room > 1e9 ? int32_t(1e9) : int32_t(room);
}

}  // namespace conveyor
