// Sampling one token from a row of logits, per sequence.
//
// Each sequence owns a Sampler: its parameters, its random generator (seeded
// from the request's seed, so the same seed gives the same output whatever
// else is in the batch) and the token counts the penalties need.
//
// The pipeline, as in vLLM and llama.cpp:
//   1. penalties on the raw logits: repetition (HF style, over prompt and
//      generated tokens: logit > 0 -> logit / p, else logit * p), then
//      frequency and presence (OpenAI style, over generated tokens only:
//      logit -= frequency * count + presence * (count > 0));
//   2. logprobs, when asked for, of the RAW model distribution: log_softmax of
//      the logits as the model produced them, before penalties and
//      temperature (vLLM's "raw_logprobs" mode). They describe what the model
//      believed, whatever the request's sampling settings;
//   3. temperature: below 1e-5, greedy argmax (ties go to the lowest id) and
//      the filters below are skipped;
//   4. top-k, then top-p, then min-p;
//   5. a draw from what is left with the sequence's own generator, walking
//      the kept tokens in id order (as a device can: kernels/cuda).
// Ties between equal logits are always broken by the lower token id, so the
// result depends only on the logits, the parameters and the seed.
//
// Thread safety: a Sampler is used by one thread at a time; distinct Samplers
// share nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace conveyor {
namespace grammar {
struct Grammar;
class CompiledGrammar;
class Matcher;
}  // namespace grammar

// A grammar the sampled text must follow (structured outputs, tool calls;
// grammar/). The IR is what travels to an engine node in another process
// (actors/messages.hpp); `compiled` binds it to this process's vocabulary
// and is what the sampler matches. A node that receives only the IR compiles
// it again (Engine::submit).
struct GrammarConstraint {
  std::shared_ptr<const grammar::Grammar> ir;
  std::shared_ptr<const grammar::CompiledGrammar> compiled;
  explicit operator bool() const { return ir != nullptr || compiled != nullptr; }
};

// Logprobs alternatives are capped at this many, as the OpenAI API does.
inline constexpr int32_t kMaxLogprobs = 20;

// Below this temperature sampling is greedy.
inline constexpr float kGreedyTemperature = 1e-5f;

// OpenAI's logit_bias: added to one token's logit before anything else.
struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;  // [-100, 100]: -100 in effect bans the token, 100 all but forces it
};

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
  std::vector<LogitBias> logit_bias;  // sorted by token, each token once
  // Only tokens the grammar allows are sampled, end tokens only where the
  // grammar can end (grammar/matcher.hpp). Empty: free text.
  GrammarConstraint grammar;
};

// Checks every field against its documented range (temperature >= 0, top_p
// in (0, 1], top_k >= 0, min_p in [0, 1], presence and frequency penalties in
// [-2, 2], repetition_penalty > 0, logprobs in [-1, 20], max_tokens >= 1, stop
// token ids in [0, vocab_size), logit_bias tokens in [0, vocab_size), sorted
// and distinct, with biases in [-100, 100]). The error (Errc::invalid_argument) names the
// parameter and the value, e.g. "top_p must be in (0, 1], got 1.5".
Status validate(const SamplingParams& params, int32_t vocab_size);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token = 0;
  // log-probability of `token` under the raw model distribution; filled only
  // when params.logprobs >= 0 (0 otherwise).
  float logprob = 0.0f;
  // the min(logprobs, 20) most likely tokens of the raw distribution, most
  // likely first (ties: lower id first).
  std::vector<TokenLogprob> top;
};

class Sampler {
 public:
  // `params` should have passed validate(). `prompt` feeds the repetition
  // penalty; it is not kept.
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt);

  ~Sampler();
  Sampler(Sampler&&) noexcept;

  // Samples from `logits` ([vocab]; overwritten with scratch values) and
  // records the token as generated. With a grammar, tokens it refuses are
  // masked first (after the logprobs' raw copy: logprobs stay the model's).
  SampleResult sample(std::span<float> logits);

  // Brings a new sampler to where one that had sampled `generated` would be:
  // their penalty counts, and the generator advanced one draw per token
  // (sample() draws exactly once per token when not greedy). An engine
  // restart recomputes a sequence with a new sampler; this keeps its output
  // that of an undisturbed run.
  void replay(std::span<const int32_t> generated);

  // Whether a device can sample for this sampler with kernels/cuda's
  // penalties and sample_rows: whenever no logprobs (they need the raw row
  // on the host), no logit biases and no grammar are asked for. Penalties, temperature,
  // top-k, top-p and min-p are the device's.
  bool device_samplable() const;
  // The device's inputs for one row: the distinct prompt and generated
  // tokens (when the repetition penalty is on), the generated tokens with
  // their counts, and the draw's uniform from this sampler's generator
  // (advancing it as sample() does; 0 and no draw when greedy).
  std::span<const int32_t> seen_tokens() const { return seen_; }
  std::span<const std::pair<int32_t, int32_t>> generated_counts() const { return generated_counts_; }
  double device_uniform() { return is_greedy() ? 0.0 : uniform(); }
  // Records `token`, sampled elsewhere (device_samplable() holds, and
  // device_uniform() was drawn for it), as sample() would have.
  void accept(int32_t token);
  // Sets every token the grammar refuses next to -inf (no grammar: nothing).
  void apply_grammar(std::span<float> logits) const;
  // Computes the grammar's mask for the next token now, so that sample()
  // finds it ready instead of computing it after the logits arrive: another
  // thread may call this while the next forward pass runs
  // (backends/mask_prefetch.hpp), never at the same time as any other member
  // of this sampler. Nothing without a grammar, or when already prepared.
  void prepare_mask();
  bool mask_prepared() const { return mask_prepared_; }
  // Step 1 of sample(), exposed so that tests and callers can see it: adds
  // the logit biases, then applies the repetition, frequency and presence
  // penalties to `logits` ([vocab]).
  void apply_penalties(std::span<float> logits) const;

  // True when `token` ends the sequence: one of the model's `eos_ids` (unless
  // params.ignore_eos) or one of params.stop_token_ids.
  bool is_stop_token(int32_t token, std::span<const int32_t> eos_ids) const;

  const SamplingParams& params() const { return params_; }

  // How many times `token` has been generated (sampled) so far.
  int32_t generated_count(int32_t token) const;

 private:
  bool is_greedy() const { return params_.temperature < kGreedyTemperature; }
  // Uniform in [0, 1), built from 53 generator bits so that a seed gives the
  // same draws with any standard library.
  double uniform();
  // Steps 3 to 5 under a grammar: on the allowed tokens alone when they are
  // few, else on the row with the others at -inf.
  int32_t sample_constrained(std::span<float> logits);
  // The grammar's mask for a row of `row` logits into the thread's scratch;
  // returns how many of the row's ids the vocabulary covers.
  size_t fill_grammar_mask(size_t row) const;
  void mask_logits(std::span<float> logits) const;  // with the scratch mask
  // Steps 3 to 5 for a positive temperature, on the penalised logits.
  int32_t sample_random(std::span<const float> logits);
  void fill_logprobs(std::span<const float> raw, SampleResult& result);
  void record(int32_t token);

  // Work buffers are per thread (see sampler.cpp), not here: a sequence's
  // state stays small however large the vocabulary.
  SamplingParams params_;
  std::mt19937_64 rng_;
  // Sorted vectors rather than hash tables: the penalties walk them every
  // step, and a walk over contiguous ids is several times faster.
  std::vector<std::pair<int32_t, int32_t>> generated_counts_;  // (token, count), by token
  std::vector<int32_t> seen_;  // distinct prompt and generated tokens, sorted; only when repetition_penalty != 1
  std::unique_ptr<grammar::Matcher> matcher_;  // with a compiled grammar: where the text is in it
  std::vector<uint64_t> prepared_mask_;         // prepare_mask()'s, for the matcher's position now
  bool mask_prepared_ = false;
};

}  // namespace conveyor
