// validate(SamplingParams): the ranges of the OpenAI and vLLM APIs.
#include <cmath>
#include <sstream>
#include <string>

#include "model/sampling/sampler.hpp"

namespace conveyor {

namespace {

template <class T>
Error invalid(const char* name, const char* range, T value) {
  std::ostringstream out;
  out << name << " must be " << range << ", got " << value;
  return make_error(Errc::invalid_argument, out.str());
}

}  // namespace

// Comparisons are written so that NaN fails them.
Status validate(const SamplingParams& p, int32_t vocab_size) {
  if (vocab_size <= 0) return invalid("vocab_size", "positive", vocab_size);
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature)) {
    return invalid("temperature", "finite and >= 0", p.temperature);
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return invalid("top_p", "in (0, 1]", p.top_p);
  if (p.top_k < 0) return invalid("top_k", ">= 0 (0 disables it)", p.top_k);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return invalid("min_p", "in [0, 1]", p.min_p);
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return invalid("presence_penalty", "in [-2, 2]", p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return invalid("frequency_penalty", "in [-2, 2]", p.frequency_penalty);
  }
  if (!(p.repetition_penalty > 0.0f) || std::isinf(p.repetition_penalty)) {
    return invalid("repetition_penalty", "finite and > 0", p.repetition_penalty);
  }
  if (p.logprobs < -1 || p.logprobs > kMaxLogprobs) {
    return invalid("logprobs", "in [0, 20], or -1 for none", p.logprobs);
  }
  if (p.max_tokens < 1) return invalid("max_tokens", ">= 1", p.max_tokens);
  for (int32_t id : p.stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return invalid("stop_token_ids", ("token ids in [0, " + std::to_string(vocab_size) + ")").c_str(), id);
    }
  }
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const LogitBias& b = p.logit_bias[i];
    if (b.token < 0 || b.token >= vocab_size) {
      return invalid("logit_bias", ("keyed by token ids in [0, " + std::to_string(vocab_size) + ")").c_str(),
                     b.token);
    }
    if (!(b.bias >= -100.0f && b.bias <= 100.0f)) return invalid("logit_bias", "values in [-100, 100]", b.bias);
    if (i > 0 && !(p.logit_bias[i - 1].token < b.token)) {
      return invalid("logit_bias", "sorted by token, each token once; token repeated or out of order", b.token);
    }
  }
  if (p.grammar && !p.grammar.compiled) {
    return make_error(Errc::invalid_argument, "the request's grammar is not compiled for this model's vocabulary");
  }
  if (p.grammar && p.ignore_eos) {
    return make_error(Errc::invalid_argument,
                      "ignore_eos cannot be combined with a grammar (response_format, structured outputs, a GBNF "
                      "grammar, or tools the output is held to): the grammar decides where the text ends");
  }
  return Status::ok();
}

}  // namespace conveyor
