#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "model/sampling/sampler.hpp"

namespace conveyor {
namespace {

constexpr int32_t kVocab = 32000;

// Expects validate() to reject `p` with a message naming `name`.
void expect_rejected(const SamplingParams& p, const std::string& name) {
  const Status s = validate(p, kVocab);
  ASSERT_FALSE(s.is_ok()) << name << " was accepted";
  EXPECT_EQ(s.error().code, Errc::invalid_argument);
  EXPECT_EQ(s.error().message.rfind(name, 0), 0u) << s.error().message;
}

SamplingParams with(const std::function<void(SamplingParams&)>& edit) {
  SamplingParams p;
  edit(p);
  return p;
}

TEST(Validate, AcceptsDefaultsAndBoundaries) {
  EXPECT_TRUE(validate(SamplingParams{}, kVocab).is_ok());
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.top_k = kVocab * 2;  // larger than the vocab: no effect, not an error
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.repetition_penalty = 0.01f;
  p.logprobs = 20;
  p.max_tokens = 1;
  p.stop_token_ids = {0, kVocab - 1};
  EXPECT_TRUE(validate(p, kVocab).is_ok());
}

TEST(Validate, RejectsEachBadValue) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  expect_rejected(with([](auto& p) { p.temperature = -0.1f; }), "temperature");
  expect_rejected(with([&](auto& p) { p.temperature = nan; }), "temperature");
  expect_rejected(with([&](auto& p) { p.temperature = inf; }), "temperature");
  expect_rejected(with([](auto& p) { p.top_p = 0.0f; }), "top_p");
  expect_rejected(with([](auto& p) { p.top_p = 1.5f; }), "top_p");
  expect_rejected(with([&](auto& p) { p.top_p = nan; }), "top_p");
  expect_rejected(with([](auto& p) { p.top_k = -1; }), "top_k");
  expect_rejected(with([](auto& p) { p.min_p = -0.01f; }), "min_p");
  expect_rejected(with([](auto& p) { p.min_p = 1.01f; }), "min_p");
  expect_rejected(with([](auto& p) { p.presence_penalty = 2.5f; }), "presence_penalty");
  expect_rejected(with([](auto& p) { p.presence_penalty = -2.5f; }), "presence_penalty");
  expect_rejected(with([](auto& p) { p.frequency_penalty = 2.01f; }), "frequency_penalty");
  expect_rejected(with([](auto& p) { p.frequency_penalty = -3.0f; }), "frequency_penalty");
  expect_rejected(with([](auto& p) { p.repetition_penalty = 0.0f; }), "repetition_penalty");
  expect_rejected(with([](auto& p) { p.repetition_penalty = -1.0f; }), "repetition_penalty");
  expect_rejected(with([&](auto& p) { p.repetition_penalty = inf; }), "repetition_penalty");
  expect_rejected(with([](auto& p) { p.logprobs = 21; }), "logprobs");
  expect_rejected(with([](auto& p) { p.logprobs = -2; }), "logprobs");
  expect_rejected(with([](auto& p) { p.max_tokens = 0; }), "max_tokens");
  expect_rejected(with([](auto& p) { p.stop_token_ids = {5, kVocab}; }), "stop_token_ids");
  expect_rejected(with([](auto& p) { p.stop_token_ids = {-1}; }), "stop_token_ids");
}

TEST(Validate, MessageGivesRangeAndValue) {
  SamplingParams p;
  p.top_p = 1.5f;
  const Status s = validate(p, kVocab);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().message, "top_p must be in (0, 1], got 1.5");
}

TEST(Validate, RejectsEmptyVocab) {
  EXPECT_FALSE(validate(SamplingParams{}, 0).is_ok());
}

TEST(Validate, LogitBiasNamesItsTokensAndRange) {
  EXPECT_TRUE(validate(with([](SamplingParams& p) { p.logit_bias = {{0, -100.0f}, {kVocab - 1, 100.0f}}; }), kVocab));
  expect_rejected(with([](SamplingParams& p) { p.logit_bias = {{kVocab, 1.0f}}; }), "logit_bias");
  expect_rejected(with([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }), "logit_bias");
  expect_rejected(with([](SamplingParams& p) { p.logit_bias = {{5, 100.5f}}; }), "logit_bias");
  expect_rejected(with([](SamplingParams& p) { p.logit_bias = {{5, std::nanf("")}}; }), "logit_bias");
  expect_rejected(with([](SamplingParams& p) { p.logit_bias = {{5, 1.0f}, {5, 2.0f}}; }), "logit_bias");
  expect_rejected(with([](SamplingParams& p) { p.logit_bias = {{6, 1.0f}, {5, 2.0f}}; }), "logit_bias");
}

}  // namespace
}  // namespace conveyor
