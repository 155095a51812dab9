// The arithmetic of the CUDA sampling kernels (sampling.cu), mirroring the
// CPU sampler (model/sampling/sampler.hpp, filters.hpp) where it can:
//   - penalties: the same operations in the same order (repetition, then
//     frequency and presence), so the same floats, also when the previous
//     step's sample is still on the device only (PenaltyRow::pending);
//   - greedy: the largest logit, ties to the lower id, NaN never chosen
//     unless all are NaN (then id 0): the same id;
//   - temperature and min-p: weights exp_nonpositive((l - max) / T), the
//     CPU's Cephes polynomial; identical when compiled without FMA
//     contraction (sampling.cu is built with --fmad=false for this);
//   - top-k and top-p: both keep a prefix of the ranking (larger logit
//     first, ties to the lower id), so what they keep is every token ranked
//     at or above one boundary token, a Cut. select_cut finds it with a
//     radix select over the logits' order-preserving keys: the same tokens
//     for top-k; for top-p the running mass is summed in fixed point (2^-40
//     units) where the CPU sums doubles, so a cut whose mass lies within
//     about 1e-12 of top_p · total may keep one token more or less;
//   - the draw: a uniform in [0, 1) drawn on the host from the sequence's
//     own generator (the CPU Sampler's), and the same walk in token order
//     over the kept tokens whose weight is >= min_p. The running sums are
//     doubles added in another order than the CPU's, so a draw that falls
//     within rounding (about 1e-16 of the total) of a boundary between two
//     tokens may pick the neighbour.
#pragma once

#include <cmath>

#include "kernels/cuda/hd.hpp"

namespace conveyor::kernels::cuda {

CONVEYOR_HD float repetition_penalized(float logit, float penalty) {
  return logit > 0.0f ? logit / penalty : logit * penalty;
}

CONVEYOR_HD float count_penalized(float logit, int32_t count, float frequency, float presence) {
  return logit - (frequency * float(count) + presence);
}

// Whether the ascending list v[0, n) holds x.
CONVEYOR_HD bool sorted_contains(const int32_t* v, int32_t n, int32_t x) {
  int32_t lo = 0, hi = n;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (v[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && v[lo] == x;
}

// One row's penalties: the tokens seen (prompt and generated, distinct,
// ascending), the generated ones (distinct, ascending) with their counts,
// and `pending` (-1: none), a token the step before sampled that the lists
// do not hold yet: it counts as seen and generated once more, as in the CPU
// Sampler once it has recorded it.
struct PenaltyRow {
  float repetition, frequency, presence;
  const int32_t* seen;
  int32_t n_seen;
  const int32_t* generated;
  const int32_t* counts;
  int32_t n_generated;
  int32_t pending;
};

// Each row's penalties, [rows] each unless said.
struct RowPenalties {
  const float* repetition;
  const float* frequency;
  const float* presence;
  const int32_t* seen_begin;  // [rows + 1], into seen: the row's prompt and generated ids, distinct, ascending
  const int32_t* seen;
  const int32_t* gen_begin;   // [rows + 1], into generated (distinct, ascending) and gen_counts
  const int32_t* generated;
  const int32_t* gen_counts;
  // Where a row's sequence has a sample the lists do not hold yet (the step
  // before sampled it, and it is still on the device only):
  // previous_picks[previous_row[r]], counted as seen and generated once
  // more; previous_row[r] < 0, or previous_row null, where none.
  const int32_t* previous_row;
  const int32_t* previous_picks;
};

// Row r's share of `p`.
CONVEYOR_HD PenaltyRow penalty_row(const RowPenalties& p, int32_t r) {
  const int32_t seen = p.seen_begin[r], gen = p.gen_begin[r];
  const int32_t previous = p.previous_row != nullptr ? p.previous_row[r] : -1;
  return PenaltyRow{p.repetition[r],        p.frequency[r],     p.presence[r],
                    p.seen + seen,          p.seen_begin[r + 1] - seen,
                    p.generated + gen,      p.gen_counts + gen, p.gen_begin[r + 1] - gen,
                    previous >= 0 ? p.previous_picks[previous] : -1};
}

// Sampler::apply_penalties's operations per token, in two phases that lane
// `lane` of `lanes` runs its share of (a block's threads): every lane ends
// the repetition phase before any begins the counts phase.
CONVEYOR_HD void penalize_repetition(float* l, int32_t vocab, const PenaltyRow& r, int32_t lane, int32_t lanes) {
  if (r.repetition == 1.0f) return;
  for (int32_t i = lane; i < r.n_seen; i += lanes) {
    const int32_t t = r.seen[i];
    if (t >= 0 && t < vocab) l[t] = repetition_penalized(l[t], r.repetition);
  }
  const int32_t p = r.pending;
  if (lane == 0 && p >= 0 && p < vocab && !sorted_contains(r.seen, r.n_seen, p))
    l[p] = repetition_penalized(l[p], r.repetition);
}

CONVEYOR_HD void penalize_counts(float* l, int32_t vocab, const PenaltyRow& r, int32_t lane, int32_t lanes) {
  if (r.frequency == 0.0f && r.presence == 0.0f) return;
  for (int32_t i = lane; i < r.n_generated; i += lanes) {
    const int32_t t = r.generated[i];
    if (t >= 0 && t < vocab) l[t] = count_penalized(l[t], r.counts[i] + (t == r.pending), r.frequency, r.presence);
  }
  const int32_t p = r.pending;
  if (lane == 0 && p >= 0 && p < vocab && !sorted_contains(r.generated, r.n_generated, p))
    l[p] = count_penalized(l[p], 1, r.frequency, r.presence);
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

// ---- top-k and top-p: a cut in the ranking ----------------------------------

// A logit's key: unsigned, in the ranking's order (a larger logit, a larger
// key); -0 and +0 share one, as they compare equal.
CONVEYOR_HD uint32_t rank_key(float logit) {
  const uint32_t b = float_bits(logit == 0.0f ? 0.0f : logit);
  return (b & 0x80000000u) != 0 ? ~b : b | 0x80000000u;
}

// The tokens a filter keeps: those ranked at or above the token (key, id).
struct Cut {
  uint32_t key = 0;
  int32_t id = 0x7fffffff;  // the default keeps every candidate
};

// Whether token `id` with this logit is kept: a candidate (its logit above
// -inf, not NaN, as the CPU's top_k and nucleus ask) at or above the cut.
CONVEYOR_HD bool kept(float logit, int32_t id, Cut cut) {
  if (!(logit > bits_float(0xff800000u))) return false;
  const uint32_t key = rank_key(logit);
  return key > cut.key || (key == cut.key && id <= cut.id);
}

// top-p's weights in fixed point: exact integer sums in any order, so the
// device's atomics give the same cut every run. A weight below 2^-40 counts 0.
inline constexpr double kMassUnit = 1099511627776.0;  // 2^40
CONVEYOR_HD uint64_t mass_weight(float logit, float max, float inv_temperature) {
  return uint64_t(double(exp_nonpositive((logit - max) * inv_temperature)) * kMassUnit);
}

// top-p's target: the CPU's (top_p - 1e-6) · total (kTopPSlack in
// sampler.cpp), rounded up to a whole unit, at least one so that the best
// token (weight 1) always stays.
CONVEYOR_HD uint64_t mass_target(float top_p, uint64_t total) {
  const double mass = (double(top_p) - 1e-6) * double(total);
  const uint64_t target = mass > 0.0 ? uint64_t(ceil(mass)) : 0;
  return target > 0 ? target : 1;
}

// The first token of the ranking, within `within`, at which the running
// weight reaches target_of(total weight within `within`); `within` itself
// when none does. top-k: weights 1, target k; top-p: mass weights, target
// mass_target. The same code runs on one host thread (tests) and on every
// thread of a block (sampling.cu), through `row`'s collective operations:
//   row.histogram(prefix, mask, shift, within, weight): the weights of the
//     kept tokens whose key & mask == prefix, by (key >> shift) & 255,
//     returned as 256 bins;
//   row.tie_id(key, within, before, target, weight): the lowest id at which
//     `before` plus the running weight, in id order, of the kept tokens with
//     this key reaches target.
template <class Row, class Weight, class Target>
CONVEYOR_HD Cut select_cut(Row& row, Cut within, Weight weight, Target target_of) {
  uint32_t prefix = 0, mask = 0;
  uint64_t before = 0, target = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint64_t* bins = row.histogram(prefix, mask, shift, within, weight);
    if (shift == 24) {
      uint64_t total = 0;
      for (int b = 0; b < 256; ++b) total += bins[b];
      target = target_of(total);
    }
    int b = 255;
    for (; b >= 0; --b) {
      if (before + bins[b] >= target) break;
      before += bins[b];
    }
    if (b < 0) return within;  // the whole set falls short: keep it
    prefix |= uint32_t(b) << shift;
    mask |= 0xffu << shift;
  }
  return Cut{prefix, row.tie_id(prefix, within, before, target, weight)};
}

// tie_id's walk over one run of ids [begin, end): the first id whose weight
// brings `running` to target, or -1 (running then holds the run's weight added).
template <class Weight>
CONVEYOR_HD int32_t first_reaching(int32_t begin, int32_t end, uint64_t& running, uint64_t target, Weight weight) {
  for (int32_t i = begin; i < end; ++i) {
    running += weight(i);
    if (running >= target) return i;
  }
  return -1;
}

}  // namespace conveyor::kernels::cuda
