// Sampling one token from a row of logits, per sequence.
//
// Each sequence owns a Sampler: its parameters, its random generator (seeded
// from the request's seed, so the same seed gives the same output whatever
// else is in the batch) and the token counts the penalties need.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace conveyor {

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy (argmax)
  int32_t top_k = 0;                // keep the k most likely tokens; 0: off
  float top_p = 1.0f;               // nucleus: smallest set with mass >= top_p; 1: off
  float min_p = 0.0f;               // drop tokens with p < min_p * p_max; 0: off
  float presence_penalty = 0.0f;    // OpenAI: -= penalty if the token was generated
  float frequency_penalty = 0.0f;   // OpenAI: -= penalty * count in generated tokens
  float repetition_penalty = 1.0f;  // HF/vLLM: over prompt and generated; 1: off
  uint64_t seed = 0;
  bool has_seed = false;            // false: seeded from a random device
  int32_t logprobs = -1;            // -1: none; N >= 0: the sampled token's logprob and N alternatives
  int32_t max_tokens = 16;          // generation length cap
  std::vector<int32_t> stop_token_ids;  // finish when one of these is sampled
  bool ignore_eos = false;          // do not finish at the model's end tokens
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;               // log-probability of `token` under the raw model distribution
  std::vector<TokenLogprob> top;      // the `logprobs` most likely tokens, most likely first
};

class Sampler {
 public:
  // `prompt` feeds the repetition penalty.
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt);

  // Samples from `logits` ([vocab]; modified in place) and records the token
  // as generated.
  SampleResult sample(std::span<float> logits);

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int32_t> generated_counts_;
  std::vector<int32_t> seen_;  // distinct prompt and generated tokens (repetition penalty)
  std::vector<std::pair<float, int32_t>> scratch_;
};

}  // namespace conveyor
