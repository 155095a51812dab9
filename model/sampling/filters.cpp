#include "model/sampling/filters.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace conveyor::sampling {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A run of at most this many candidates is sorted rather than split again.
constexpr size_t kSortRun = 64;

// nucleus(): buckets a quarter of a nat wide, the last one open-ended.
constexpr int kBuckets = 256;
constexpr float kBucketsPerNat = 4.0f;

// cut_to_mass on cands[lo, end), where everything before lo is kept and
// weighs `before`.
size_t cut_range(std::vector<Candidate>& cands, size_t lo, double before,
                 std::span<const float> weights, double mass) {
  auto at = [&](size_t i) { return cands.begin() + static_cast<std::ptrdiff_t>(i); };
  size_t hi = cands.size();
  while (hi - lo > kSortRun) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(at(lo), at(mid), at(hi), more_likely);
    double head = 0.0;
    for (size_t i = lo; i < mid; ++i) head += weights[cands[i].second];
    if (before + head >= mass) {
      hi = mid;  // the cut lies in [lo, mid): the rest is out
    } else {
      before += head;
      lo = mid;
    }
  }
  std::sort(at(lo), at(hi), more_likely);
  size_t keep = hi;  // unreached (rounding, or mass > total): keep what is left
  for (size_t i = lo; i < hi; ++i) {
    before += weights[cands[i].second];
    if (before >= mass) {
      keep = i + 1;
      break;
    }
  }
  cands.resize(keep);
  return keep;
}

// Draws token i with probability proportional to weight(i) (>= 0), walking
// [0, n) in order; weight(0) .. weight(n - 1) must not all be 0.
template <class Weight>
int32_t draw_walk(size_t n, Weight weight, double uniform) {
  double total = 0.0;
#pragma omp simd reduction(+ : total)
  for (size_t i = 0; i < n; ++i) total += weight(i);

  // Skip whole blocks (summed vectorised) until the one holding the target.
  const double target = uniform * total;
  constexpr size_t kBlock = 64;
  double cumulative = 0.0;
  int32_t last_positive = 0;
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t end = std::min(n, start + kBlock);
    double block = 0.0;
#pragma omp simd reduction(+ : block)
    for (size_t i = start; i < end; ++i) block += weight(i);
    if (block <= 0.0) continue;
    if (cumulative + block <= target && end < n) {
      cumulative += block;
      continue;
    }
    for (size_t i = start; i < end; ++i) {
      const float w = weight(i);
      if (!(w > 0.0f)) continue;
      cumulative += w;
      last_positive = static_cast<int32_t>(i);
      if (target < cumulative) return last_positive;
    }
  }
  return last_positive;  // rounding left the target at the very top
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
  // Two passes, the first vectorised, beat one pass with a branch per token.
  const float max = max_logit(logits);
  const auto it = std::find(logits.begin(), logits.end(), max);  // -inf: the first -inf
  return it == logits.end() ? 0 : static_cast<int32_t>(it - logits.begin());
}

// The row loops below are `omp simd` reductions (compiled with
// -fopenmp-simd: no OpenMP runtime): without them GCC keeps a float max or
// sum scalar, being barred from reassociating it. Sums are in double, so the
// order does not show at 32000 terms.

float max_logit(std::span<const float> logits) {
  const float* p = logits.data();
  const size_t n = logits.size();
  float m = kNegInf;
#pragma omp simd reduction(max : m)
  for (size_t i = 0; i < n; ++i) {
    const float l = p[i] == p[i] ? p[i] : kNegInf;  // NaN never wins
    m = l > m ? l : m;
  }
  // Clang starts each lane of an `omp simd` max reduction at the lowest
  // finite float, not -inf: a row without a finite logit would come out as
  // -FLT_MAX (and argmax would return 0, a NaN's index, not the first -inf).
  if (m == std::numeric_limits<float>::lowest() && std::find(p, p + n, m) == p + n) return kNegInf;
  return m;
}

double softmax_weights(std::span<const float> logits, float max, float inv_temperature,
                       std::span<float> weights) {
  const float* p = logits.data();
  float* w = weights.data();
  const size_t n = logits.size();
  double total = 0.0;
#pragma omp simd reduction(+ : total)
  for (size_t i = 0; i < n; ++i) {
    w[i] = exp_nonpositive((p[i] - max) * inv_temperature);
    total += w[i];
  }
  return total;
}

float log_sum_exp(std::span<const float> logits) {
  const float max = max_logit(logits);
  if (!std::isfinite(max)) return max;
  const float* p = logits.data();
  const size_t n = logits.size();
  double total = 0.0;
#pragma omp simd reduction(+ : total)
  for (size_t i = 0; i < n; ++i) total += exp_nonpositive(p[i] - max);
  return max + static_cast<float>(std::log(total));
}

void top_k(std::span<const float> logits, int32_t k, std::vector<Candidate>& out) {
  out.clear();
  if (k <= 0) return;
  const auto wanted = static_cast<size_t>(k);
  if (wanted * 8 < logits.size()) {
    // One pass with a heap of the k best so far, least likely on top: most
    // tokens lose to the top in a single comparison.
    // Blocks whose max cannot enter the heap are skipped whole.
    out.reserve(wanted);
    constexpr size_t kBlock = 64;
    for (size_t start = 0; start < logits.size(); start += kBlock) {
      const auto block = logits.subspan(start, std::min(kBlock, logits.size() - start));
      if (out.size() == wanted && max_logit(block) < out.front().first) continue;
      for (size_t i = 0; i < block.size(); ++i) {
        const Candidate c{block[i], static_cast<int32_t>(start + i)};
        if (!(c.first > kNegInf)) continue;
        if (out.size() < wanted) {
          out.push_back(c);
          std::push_heap(out.begin(), out.end(), more_likely);
        } else if (more_likely(c, out.front())) {
          std::pop_heap(out.begin(), out.end(), more_likely);
          out.back() = c;
          std::push_heap(out.begin(), out.end(), more_likely);
        }
      }
    }
    std::sort_heap(out.begin(), out.end(), more_likely);
    return;
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > kNegInf) out.emplace_back(logits[i], static_cast<int32_t>(i));
  }
  if (wanted < out.size()) {
    std::nth_element(out.begin(), out.begin() + k, out.end(), more_likely);
    out.resize(wanted);
  }
  std::sort(out.begin(), out.end(), more_likely);
}

size_t cut_to_mass(std::vector<Candidate>& cands, std::span<const float> weights, double mass) {
  return cut_range(cands, 0, 0.0, weights, mass);
}

void nucleus(std::span<const float> logits, std::span<const float> weights, float max,
             float inv_temperature, double mass, std::vector<Candidate>& out) {
  // Monotone in the logit, so a bucket holds a contiguous run of the ranking.
  // Tokens of weight 0 go to a sink bucket past the last.
  auto bucket_of = [&](float logit, float weight) {
    const float d = (max - logit) * inv_temperature * kBucketsPerNat;
    const int b = d < static_cast<float>(kBuckets - 1) ? static_cast<int>(d) : kBuckets - 1;
    return weight > 0.0f ? b : kBuckets;
  };
  // Interleaved histograms: on a flat row most tokens share a bucket, and
  // one histogram would make that a chain of dependent additions.
  constexpr size_t kCopies = 8;
  double histograms[kCopies][kBuckets + 1] = {};
  constexpr size_t kChunk = 256;
  int chunk_bucket[kChunk];
  for (size_t start = 0; start < logits.size(); start += kChunk) {
    const size_t len = std::min(kChunk, logits.size() - start);
    for (size_t i = 0; i < len; ++i) {  // vectorises
      chunk_bucket[i] = bucket_of(logits[start + i], weights[start + i]);
    }
    for (size_t i = 0; i < len; ++i) {
      histograms[i % kCopies][chunk_bucket[i]] += weights[start + i];
    }
  }
  double bucket_mass[kBuckets] = {};
  for (int b = 0; b < kBuckets; ++b) {
    for (const auto& h : histograms) bucket_mass[b] += h[b];
  }

  int cut = kBuckets - 1;
  double before = 0.0;
  for (int b = 0; b < kBuckets; ++b) {
    if (before + bucket_mass[b] >= mass) {
      cut = b;
      break;
    }
    if (b < kBuckets - 1) before += bucket_mass[b];
  }

  // Buckets up to `cut` hold logits above this bound (the last bucket has
  // none); the margin absorbs rounding, and bucket_of has the last word.
  const float bound =
      cut == kBuckets - 1
          ? kNegInf
          : max - (static_cast<float>(cut) + 1.5f) / (kBucketsPerNat * inv_temperature);
  out.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] >= bound && bucket_of(logits[i], weights[i]) <= cut) {
      out.emplace_back(logits[i], static_cast<int32_t>(i));
    }
  }
  const auto boundary = std::partition(out.begin(), out.end(), [&](const Candidate& c) {
    return bucket_of(c.first, weights[c.second]) < cut;
  });
  cut_range(out, static_cast<size_t>(boundary - out.begin()), before, weights, mass);
}

int32_t draw(std::span<const Candidate> cands, std::span<const float> weights, double uniform) {
  double total = 0.0;
  for (const auto& c : cands) total += weights[c.second];
  const double target = uniform * total;
  double cumulative = 0.0;
  int32_t last_positive = cands.front().second;
  for (const auto& c : cands) {
    const float w = weights[c.second];
    if (w <= 0.0f) continue;
    cumulative += w;
    last_positive = c.second;
    if (target < cumulative) return c.second;
  }
  return last_positive;  // rounding left the target at the very top
}

int32_t draw_row(std::span<const float> weights, float min_weight, double uniform) {
  const float* w = weights.data();
  return draw_walk(weights.size(), [=](size_t i) { return w[i] >= min_weight ? w[i] : 0.0f; }, uniform);
}

int32_t draw_ranked(std::span<const float> logits, std::span<const float> weights, Candidate last,
                    float min_weight, double uniform) {
  const float* l = logits.data();
  const float* w = weights.data();
  const float bound = last.first;
  const auto last_id = static_cast<size_t>(last.second);
  // Weights of tokens outside the cut are never summed: they may be stale.
  return draw_walk(
      logits.size(),
      [=](size_t i) {
        const bool ranked = l[i] > bound || (l[i] == bound && i <= last_id);
        return ranked && w[i] >= min_weight ? w[i] : 0.0f;
      },
      uniform);
}

}  // namespace conveyor::sampling
