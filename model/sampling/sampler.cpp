#include "model/sampling/sampler.hpp"

#include <algorithm>
#include <cassert>
#include <bit>
#include <cmath>
#include <limits>

#include "grammar/matcher.hpp"
#include "model/sampling/filters.hpp"

namespace conveyor {

namespace {

// Per-thread work space, so that a Sampler (one per sequence) carries only
// its own state and a step allocates nothing once the buffers have grown.
struct Scratch {
  std::vector<float> raw;      // [vocab] the row before penalties (logprobs)
  std::vector<float> weights;  // [vocab] unnormalised probabilities
  std::vector<sampling::Candidate> candidates;
  std::vector<uint64_t> mask;  // [vocab / 64] the grammar's allowed tokens
  std::vector<int32_t> allowed_ids;   // a sparse mask's tokens, in id order
  std::vector<float> allowed_logits;  // and their logits
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Within this share of the total, a top-p running mass counts as reaching
// top_p, so that float rounding cannot pull a boundary token in.
constexpr double kTopPSlack = 1e-6;

}  // namespace

Sampler::Sampler(const SamplingParams& params, std::span<const int32_t> prompt)
    : params_(params) {
  if (params_.has_seed) {
    rng_.seed(params_.seed);
  } else {
    std::random_device device;
    rng_.seed((static_cast<uint64_t>(device()) << 32) ^ device());
  }
  if (params_.repetition_penalty != 1.0f) {
    seen_.assign(prompt.begin(), prompt.end());
    std::sort(seen_.begin(), seen_.end());
    seen_.erase(std::unique(seen_.begin(), seen_.end()), seen_.end());
  }
  if (params_.grammar.compiled) matcher_ = std::make_unique<grammar::Matcher>(params_.grammar.compiled);
}

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;

SampleResult Sampler::sample(std::span<float> logits) {
  assert(!logits.empty());
  Scratch& s = scratch();
  const bool want_logprobs = params_.logprobs >= 0;
  if (want_logprobs) s.raw.assign(logits.begin(), logits.end());

  apply_penalties(logits);
  SampleResult result;
  if (matcher_) {
    result.token = sample_constrained(logits);
  } else {
    result.token = is_greedy() ? sampling::argmax(logits) : sample_random(logits);
  }

  if (want_logprobs) fill_logprobs(s.raw, result);
  record(result.token);
  return result;
}

void Sampler::apply_penalties(std::span<float> logits) const {
  const auto vocab = static_cast<int32_t>(logits.size());
  for (const LogitBias& b : params_.logit_bias)
    if (b.token >= 0 && b.token < vocab) logits[b.token] += b.bias;
  const float rep = params_.repetition_penalty;
  if (rep != 1.0f) {
    for (int32_t token : seen_) {
      if (token < 0 || token >= vocab) continue;
      float& l = logits[token];
      l = l > 0.0f ? l / rep : l * rep;
    }
  }
  const float freq = params_.frequency_penalty;
  const float presence = params_.presence_penalty;
  if (freq != 0.0f || presence != 0.0f) {
    for (auto [token, count] : generated_counts_) {
      if (token < 0 || token >= vocab) continue;
      logits[token] -= freq * static_cast<float>(count) + presence;
    }
  }
}

int32_t Sampler::sample_constrained(std::span<float> logits) {
  Scratch& s = scratch();
  size_t n = 0;
  if (mask_prepared_) {  // computed while the forward pass ran
    s.mask.swap(prepared_mask_);
    mask_prepared_ = false;
    n = std::min(size_t(matcher_->vocab_size()), logits.size());
  } else {
    n = fill_grammar_mask(logits.size());
  }
  size_t allowed = 0;
  for (uint64_t bits : s.mask) allowed += size_t(std::popcount(bits));
  if (allowed == 0 || allowed * 16 >= n) {
    mask_logits(logits);
    return is_greedy() ? sampling::argmax(logits) : sample_random(logits);
  }
  // Few tokens allowed (punctuation, keys, enum values): sample among them
  // alone. They keep their id order, so the distribution and the draw are
  // those of the masked row, without a pass over the whole vocabulary.
  s.allowed_ids.clear();
  s.allowed_logits.clear();
  for (size_t w = 0; w < s.mask.size(); ++w) {
    for (uint64_t bits = s.mask[w]; bits != 0; bits &= bits - 1) {
      const size_t t = w * 64 + size_t(std::countr_zero(bits));
      if (t >= n) break;
      s.allowed_ids.push_back(int32_t(t));
      s.allowed_logits.push_back(logits[t]);
    }
  }
  const std::span<float> compact(s.allowed_logits);
  const int32_t i = is_greedy() ? sampling::argmax(compact) : sample_random(compact);
  return s.allowed_ids[size_t(i)];
}

size_t Sampler::fill_grammar_mask(size_t row) const {
  std::vector<uint64_t>& mask = scratch().mask;
  const auto known = size_t(matcher_->vocab_size());
  mask.assign((known + 63) / 64, 0);
  matcher_->fill_mask(mask);
  return std::min(known, row);
}

void Sampler::prepare_mask() {
  if (!matcher_ || mask_prepared_) return;
  const auto known = size_t(matcher_->vocab_size());
  prepared_mask_.assign((known + 63) / 64, 0);
  matcher_->fill_mask(prepared_mask_);
  mask_prepared_ = true;
}

void Sampler::apply_grammar(std::span<float> logits) const {
  if (!matcher_) return;
  fill_grammar_mask(logits.size());
  mask_logits(logits);
}

void Sampler::mask_logits(std::span<float> logits) const {
  const std::vector<uint64_t>& mask = scratch().mask;
  const size_t known = std::min(size_t(matcher_->vocab_size()), logits.size());
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  // Rows wider than the tokenizer's vocabulary (padded classifiers): the
  // extra ids are no text, never allowed.
  for (size_t t = known; t < logits.size(); ++t) logits[t] = kNever;
  for (size_t w = 0; w * 64 < known; ++w) {
    const uint64_t bits = mask[w];
    if (bits == ~uint64_t(0)) continue;
    const size_t end = std::min(known, w * 64 + 64);
    if (bits == 0) {
      std::fill(logits.begin() + long(w * 64), logits.begin() + long(end), kNever);
      continue;
    }
    for (size_t t = w * 64; t < end; ++t)
      if (!((bits >> (t - w * 64)) & 1)) logits[t] = kNever;
  }
}

bool Sampler::is_stop_token(int32_t token, std::span<const int32_t> eos_ids) const {
  if (!params_.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end()) {
    return true;
  }
  const auto& stops = params_.stop_token_ids;
  return std::find(stops.begin(), stops.end(), token) != stops.end();
}

int32_t Sampler::generated_count(int32_t token) const {
  const auto it = std::lower_bound(generated_counts_.begin(), generated_counts_.end(),
                                   std::pair<int32_t, int32_t>{token, 0});
  return it != generated_counts_.end() && it->first == token ? it->second : 0;
}

void Sampler::replay(std::span<const int32_t> generated) {
  for (int32_t token : generated) {
    record(token);
    if (!is_greedy()) rng_.discard(1);
  }
}

double Sampler::uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample_random(std::span<const float> logits) {
  const float max = sampling::max_logit(logits);
  if (!std::isfinite(max)) {  // all masked, or +inf: no distribution
    uniform();  // still one draw per token, so that replay() can follow
    return sampling::argmax(logits);
  }

  Scratch& s = scratch();
  s.weights.resize(logits.size());
  const float inv_temperature = 1.0f / params_.temperature;
  const auto vocab = static_cast<int32_t>(logits.size());
  const bool use_top_k = params_.top_k > 0 && params_.top_k < vocab;
  const bool use_top_p = params_.top_p < 1.0f;

  if (!use_top_k && !use_top_p) {  // the common case: one pass, no candidate list
    sampling::softmax_weights(logits, max, inv_temperature, s.weights);
    return sampling::draw_row(s.weights, params_.min_p, uniform());
  }

  double total = 0.0;
  if (use_top_k) {
    sampling::top_k(logits, params_.top_k, s.candidates);
    for (const auto& [logit, token] : s.candidates) {
      s.weights[token] = sampling::exp_nonpositive((logit - max) * inv_temperature);
      total += s.weights[token];
    }
  } else {
    total = sampling::softmax_weights(logits, max, inv_temperature, s.weights);
  }

  if (use_top_p) {
    const double mass = (params_.top_p - kTopPSlack) * total;
    if (use_top_k) {
      sampling::cut_to_mass(s.candidates, s.weights, mass);
    } else {
      sampling::nucleus(logits, s.weights, max, inv_temperature, mass, s.candidates);
    }
  }

  if (params_.min_p > 0.0f) {
    // p / p_max is the weight itself, since the best token weighs 1; that
    // token always stays.
    std::erase_if(s.candidates,
                  [&](const sampling::Candidate& c) { return s.weights[c.second] < params_.min_p; });
  }
  // The draw walks the kept tokens in id order: a few sorted, many in place.
  if (s.candidates.size() * 32 < logits.size()) {
    std::sort(s.candidates.begin(), s.candidates.end(),
              [](const sampling::Candidate& a, const sampling::Candidate& b) { return a.second < b.second; });
    return sampling::draw(s.candidates, s.weights, uniform());
  }
  const auto last = *std::max_element(s.candidates.begin(), s.candidates.end(), sampling::more_likely);
  return sampling::draw_ranked(logits, s.weights, last, params_.min_p, uniform());
}

void Sampler::fill_logprobs(std::span<const float> raw, SampleResult& result) {
  const float log_normalizer = sampling::log_sum_exp(raw);
  result.logprob = raw[result.token] - log_normalizer;

  const int32_t wanted = std::min(params_.logprobs, kMaxLogprobs);
  if (wanted <= 0) return;
  auto& top = scratch().candidates;
  sampling::top_k(raw, wanted, top);
  result.top.reserve(top.size());
  for (const auto& [logit, token] : top) result.top.push_back({token, logit - log_normalizer});
}

bool Sampler::device_samplable() const {
  return params_.logprobs < 0 && params_.logit_bias.empty() && !matcher_;
}

void Sampler::accept(int32_t token) { record(token); }

void Sampler::record(int32_t token) {
  // A token the grammar refuses reaches here only from outside sample(): a
  // replayed history (a router's resume) from another node. The matcher keeps
  // its state then, and the next mask still follows the grammar.
  if (matcher_) (void)matcher_->accept_token(token);
  mask_prepared_ = false;  // it was the last position's
  const auto count = std::lower_bound(generated_counts_.begin(), generated_counts_.end(),
                                      std::pair<int32_t, int32_t>{token, 0});
  if (count != generated_counts_.end() && count->first == token) {
    ++count->second;
  } else {
    generated_counts_.insert(count, {token, 1});
  }
  if (params_.repetition_penalty != 1.0f) {
    const auto seen = std::lower_bound(seen_.begin(), seen_.end(), token);
    if (seen == seen_.end() || *seen != token) seen_.insert(seen, token);
  }
}

}  // namespace conveyor
