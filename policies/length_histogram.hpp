// An online distribution of output lengths for the profiled admission policy:
// a log-linear histogram (exact below 16, then 8 buckets per power of two, so
// a bucket is at most 12.5% wide), O(1) to record, O(buckets) for a quantile.
// Quantiles answer a bucket's upper bound: they err on the long side, which is
// the safe side for reserving KV blocks. With a window, every `window`
// observations all counts are halved, so the distribution follows drifting
// traffic (recent observations weigh more). Lengths above 2^21 - 1 are
// counted as 2^21 - 1.
//
// Thread-safety: none.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

namespace conveyor {

class LengthHistogram {
 public:
  static constexpr int32_t kMaxValue = (1 << 21) - 1;
  static constexpr int kBuckets = 16 + (21 - 4) * 8;

  explicit LengthHistogram(int64_t window = 0) : window_(window) {}

  void record(int64_t length) {
    ++counts_[size_t(bucket_of(length))];
    ++total_;
    ++since_decay_;
    if (window_ > 0 && since_decay_ >= window_) decay();
  }

  // Smallest bucket bound b such that at least a fraction q of the recorded
  // lengths are <= b (q clamped to [0, 1]); 0 when empty.
  int32_t quantile(double q) const {
    if (total_ == 0) return 0;
    q = std::clamp(q, 0.0, 1.0);
    uint64_t rank = std::max<uint64_t>(1, uint64_t(std::ceil(q * double(total_))));
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts_[size_t(b)];
      if (seen >= rank) return upper_bound(b);
    }
    return kMaxValue;
  }

  // Observations currently weighed (shrinks when the window halves counts).
  uint64_t count() const { return total_; }
  // Observations ever recorded.
  uint64_t recorded() const { return recorded_ + since_decay_; }

  static int bucket_of(int64_t v) {
    v = std::clamp<int64_t>(v, 0, kMaxValue);
    if (v < 16) return int(v);
    int e = std::bit_width(uint64_t(v)) - 1;  // 4..20
    int sub = int((v >> (e - 3)) & 7);
    return 16 + (e - 4) * 8 + sub;
  }
  static int32_t upper_bound(int bucket) {
    if (bucket < 16) return bucket;
    int e = (bucket - 16) / 8 + 4;
    int sub = (bucket - 16) % 8;
    return int32_t(((int64_t(8 + sub + 1)) << (e - 3)) - 1);
  }

 private:
  void decay() {
    total_ = 0;
    for (uint64_t& c : counts_) total_ += (c /= 2);
    recorded_ += uint64_t(since_decay_);
    since_decay_ = 0;
  }

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
  uint64_t recorded_ = 0;
  int64_t since_decay_ = 0;
  int64_t window_;
};

}  // namespace conveyor
