// The building blocks of Sampler, over one row of logits ([vocab] floats):
// selection, softmax weights, the top-p cut and the draw. Plain functions, so
// that tests can hold each one against a brute-force reference.
//
// Tokens are ranked by logit, larger first, ties to the lower id: a strict
// total order, so every cut is reproducible. Ranking uses the logits, not the
// weights, because exp() can map two close logits to one float. A token whose
// logit is NaN or -inf is never a candidate; neither is one whose weight
// underflows to 0 where weights decide (top-p, draw).
//
// Nothing here allocates except by growing a caller's vector.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "kernels/fast_exp.hpp"

namespace conveyor::sampling {

using Candidate = std::pair<float, int32_t>;  // (logit, token)

inline bool more_likely(const Candidate& a, const Candidate& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// exp(x) for x <= 0, to about 2 ulp; 0 below -87.3 (where expf goes
// subnormal), for -inf and NaN. Branch-free so that loops over a row
// vectorise. The CUDA sampler computes the same floats (kernels/fast_exp.hpp).
using kernels::exp_nonpositive;

// Index of the largest logit, the lowest on ties; NaN ignored; 0 if all NaN.
int32_t argmax(std::span<const float> logits);

// Largest non-NaN logit; -inf when there is none.
float max_logit(std::span<const float> logits);

// weights[i] = exp((logits[i] - max) * inv_temperature), 0 for NaN or -inf;
// returns the sum. `max` must be max_logit(logits) and finite, so the best
// token's weight is exactly 1. weights: [vocab], like logits.
double softmax_weights(std::span<const float> logits, float max, float inv_temperature,
                       std::span<float> weights);

// log(sum(exp(logits))), computed from the max; the max itself when it is
// not finite.
float log_sum_exp(std::span<const float> logits);

// Replaces `out` with the k most likely tokens, most likely first (fewer if
// fewer have a logit above -inf).
void top_k(std::span<const float> logits, int32_t k, std::vector<Candidate>& out);

// Shrinks `cands` (any order) to the smallest most-likely prefix whose weight
// reaches `mass`, or keeps them all if none does. Returns the kept count; the
// kept ones come first afterwards, in no useful order. Expected O(n): a
// quickselect on mass.
size_t cut_to_mass(std::vector<Candidate>& cands, std::span<const float> weights, double mass);

// top-p over the whole row without sorting it: buckets tokens by distance
// from the max logit, finds the bucket where the running mass crosses `mass`
// and cuts only inside that bucket. Replaces `out` with the nucleus (every
// token of positive weight if none reaches `mass`), in no useful order.
// `max`/`inv_temperature`/`weights` as given to softmax_weights.
void nucleus(std::span<const float> logits, std::span<const float> weights, float max,
             float inv_temperature, double mass, std::vector<Candidate>& out);

// Draws a candidate with probability proportional to its weight, walking
// `cands` in their order. `uniform` is in [0, 1). `cands` must not be empty.
int32_t draw(std::span<const Candidate> cands, std::span<const float> weights, double uniform);

// Draws token i with probability proportional to weights[i], counting only
// weights >= min_weight, walking the row in token order. The largest weight
// (1 after softmax_weights) must pass min_weight.
int32_t draw_row(std::span<const float> weights, float min_weight, double uniform);

// draw_row among the tokens ranked at or above `last` (more_likely than it,
// or it): what a top-k or top-p cut keeps, drawn in token order, the walk a
// device can reproduce (kernels/cuda/sampling_math.hpp). `weights` spans
// the row, but only those tokens' weights count (the others may be stale);
// `last`'s must pass min_weight.
int32_t draw_ranked(std::span<const float> logits, std::span<const float> weights, Candidate last,
                    float min_weight, double uniform);

}  // namespace conveyor::sampling
