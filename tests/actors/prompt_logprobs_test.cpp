// Prompt logprobs (GenerateRequest::prompt_logprobs) through the whole
// engine on the CPU backend: every prompt token's score equals what a plain
// forward pass over the same tokens gives at the position before it, whether
// the prompt arrives in one prefill span or in many chunks, and whether its
// leading blocks sit in the prefix cache (which such a request bypasses, and
// still fills). Then against llama.cpp's own logits on files it quantized
// (../shared/models/reference, README there): the strongest oracle.
#include <gtest/gtest.h>

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <numeric>

#include "actors/engine.hpp"
#include "tests/actors/engine_test_util.hpp"
#include "tests/actors/fake_engine.hpp"
#include "tests/actors/stories_fixture.hpp"
#include "tests/backends/cpu/reference_model.hpp"

namespace conveyor {
namespace {

using testing::EngineSystemConfig;

// What one sample of a request received.
struct Scored {
  std::vector<PromptLogprob> prompt;
  int events_with_scores = 0;
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::none;
  int32_t cached_prompt_tokens = 0;
  std::string message;
};

class ScoreCollector {
 public:
  EventCallback callback_for(request_id key) {
    return [this, key](const StreamEvent& e) {
      std::lock_guard lock(mutex_);
      Scored& s = out_[key + uint64_t(e.index)];
      if (!e.prompt_logprobs.empty()) {
        s.prompt = e.prompt_logprobs;
        ++s.events_with_scores;
      }
      s.tokens.insert(s.tokens.end(), e.token_ids.begin(), e.token_ids.end());
      if (e.last()) {
        s.finish = e.finish;
        s.cached_prompt_tokens = e.cached_prompt_tokens;
        s.message = e.message;
        ++finished_;
        cv_.notify_all();
      }
    };
  }
  std::map<request_id, Scored> wait_for(size_t n) {
    std::unique_lock lock(mutex_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(120), [&] { return finished_ >= n; }));
    return out_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<request_id, Scored> out_;
  size_t finished_ = 0;
};

RequestSpec scoring_spec(request_id id, std::vector<int32_t> prompt, int32_t top, int32_t n = 1) {
  RequestSpec spec;
  spec.request.id = id;
  spec.request.prompt = std::move(prompt);
  spec.request.sampling.temperature = n > 1 ? 1.0f : 0.0f;
  spec.request.sampling.max_tokens = 2;
  spec.request.sampling.ignore_eos = true;
  spec.request.n = n;
  spec.request.prompt_logprobs = top;
  return spec;
}

// One request on `engine`; what its sample 0 received.
Scored run_one(Engine& engine, RequestSpec spec) {
  ScoreCollector collector;
  const request_id id = spec.request.id;
  const auto n = size_t(spec.request.n);
  engine.submit(std::move(spec), collector.callback_for(id));
  return collector.wait_for(n).at(id);
}

std::vector<double> log_softmax(const std::vector<float>& logits) {
  const double m = *std::max_element(logits.begin(), logits.end());
  double s = 0;
  for (float x : logits) s += std::exp(double(x) - m);
  const double lse = m + std::log(s);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - lse;
  return out;
}

class PromptLogprobs : public testing::StoriesTest {
 protected:
  static std::vector<int32_t> prompt(size_t length) {
    std::vector<int32_t> p{1};  // BOS
    for (size_t i = 1; i < length; ++i) p.push_back(2 + int32_t((i * 131 + 7) % 509));
    return p;
  }

  // log_softmax at every position of `tokens`, from the plain reference model.
  std::vector<std::vector<double>> reference(const std::vector<int32_t>& tokens) const {
    testing::ReferenceModel ref(model_->config, model_->weights);
    std::vector<std::vector<double>> out;
    for (int32_t t : tokens) out.push_back(log_softmax(ref.step(t)));
    return out;
  }

  std::unique_ptr<Engine> engine(caf::actor_system& sys, int32_t prefill_chunk, bool prefix_caching = true) const {
    EngineConfig config;
    config.threads = 1;
    config.prefill_chunk = prefill_chunk;
    config.prefix_caching = prefix_caching;
    config.kv_cache_dtype = KvDtype::f32;  // as the reference keeps its history: the scores agree to 1e-3
    auto e = Engine::create(sys, config, *model_);
    EXPECT_TRUE(e.has_value()) << e.error().message;
    return std::move(*e);
  }

  // Each score against the reference: the logprob, the rank, the top ids in order.
  static void expect_matches(const std::vector<PromptLogprob>& got, const std::vector<int32_t>& tokens,
                             const std::vector<std::vector<double>>& ref, int32_t top) {
    ASSERT_EQ(got.size(), tokens.size() - 1);
    for (size_t i = 0; i < got.size(); ++i) {
      const std::vector<double>& want = ref[i];  // position i predicts token i + 1
      const PromptLogprob& g = got[i];
      ASSERT_EQ(g.token, tokens[i + 1]);
      EXPECT_NEAR(g.logprob, want[size_t(g.token)], 1e-3) << "token " << i + 1;
      // The rank, up to tokens within float rounding of the prompt token's logprob.
      int32_t surely_above = 0, maybe_above = 0;
      for (double lp : want) {
        surely_above += lp > want[size_t(g.token)] + 1e-4 ? 1 : 0;
        maybe_above += lp > want[size_t(g.token)] - 1e-4 ? 1 : 0;
      }
      EXPECT_GE(g.rank, surely_above + 1) << "token " << i + 1;
      EXPECT_LE(g.rank, maybe_above) << "token " << i + 1;  // maybe_above counts the token itself
      std::vector<int32_t> order(want.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return want[size_t(a)] > want[size_t(b)]; });
      ASSERT_EQ(g.top.size(), size_t(top));
      for (int32_t k = 0; k < top; ++k) {
        EXPECT_EQ(g.top[size_t(k)].token, order[size_t(k)]) << "token " << i + 1 << ", alternative " << k;
        EXPECT_NEAR(g.top[size_t(k)].logprob, want[size_t(order[size_t(k)])], 1e-3);
      }
    }
  }
};

// One 24-token span, and 70 tokens in 16-token chunks (five steps): both
// equal the reference position by position.
TEST_F(PromptLogprobs, EqualAPlainForwardPassWholeOrInChunks) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  for (auto [length, chunk] : {std::pair{24, 512}, std::pair{70, 16}}) {
    SCOPED_TRACE("prompt " + std::to_string(length) + ", chunk " + std::to_string(chunk));
    auto e = engine(sys, chunk);
    const std::vector<int32_t> p = prompt(size_t(length));
    const Scored s = run_one(*e, scoring_spec(1, p, 5));
    EXPECT_EQ(s.finish, FinishReason::length) << s.message;
    EXPECT_EQ(s.events_with_scores, 1);
    expect_matches(s.prompt, p, reference(p), 5);
    testing::expect_all_blocks_free(*e);
  }
}

// The blocks a scored prompt computes enter the prefix cache (a plain
// request finds them); a scored prompt whose leading blocks are cached is
// computed in full all the same, so every position is scored.
TEST_F(PromptLogprobs, BypassThePrefixCacheAndStillFillIt) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto e = engine(sys, 16);
  const std::vector<int32_t> p = prompt(70);
  const auto ref = reference(p);
  const Scored first = run_one(*e, scoring_spec(1, p, 3));
  EXPECT_EQ(first.cached_prompt_tokens, 0);
  expect_matches(first.prompt, p, ref, 3);
  const Scored plain = run_one(*e, scoring_spec(2, p, -1));
  EXPECT_EQ(plain.cached_prompt_tokens, 64);  // the 4 full blocks of 16 the first computed
  EXPECT_TRUE(plain.prompt.empty());
  const Scored again = run_one(*e, scoring_spec(3, p, 3));
  EXPECT_EQ(again.cached_prompt_tokens, 0);
  expect_matches(again.prompt, p, ref, 3);
  testing::expect_all_blocks_free(*e);
}

// With n = 3 samples, each sample's first event carries the prompt's scores.
TEST_F(PromptLogprobs, EverySampleGetsThemOnce) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto e = engine(sys, 16);
  const std::vector<int32_t> p = prompt(40);
  ScoreCollector collector;
  e->submit(scoring_spec(10, p, 2, 3), collector.callback_for(10));
  const auto out = collector.wait_for(3);
  const auto ref = reference(p);
  for (request_id id = 10; id < 13; ++id) {
    SCOPED_TRACE("sample " + std::to_string(id - 10));
    EXPECT_EQ(out.at(id).events_with_scores, 1);
    expect_matches(out.at(id).prompt, p, ref, 2);
  }
}

// A pool too small for the batch: sequences are preempted (recomputed from
// their tokens, or swapped out and back), some in the middle of their
// prefill; every request still gets each prompt token's score once, equal
// to the reference.
TEST_F(PromptLogprobs, SurvivePreemption) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> p = prompt(50);
    p[1] = 2 + i;  // twelve distinct prompts
    prompts.push_back(std::move(p));
  }
  for (const char* mode : {"recompute", "swap"}) {
    SCOPED_TRACE(mode);
    EngineConfig config;
    config.threads = 1;
    config.prefill_chunk = 16;
    config.kv_cache_dtype = KvDtype::f32;
    // Nine blocks: a sequence's 97 positions take 7 of them, so no two
    // sequences can both finish without a preemption (7 + a prompt's 4 > 9),
    // and two do run at once whatever the timing. The watermark (1 block)
    // admits a second sequence only while the first still holds at most its
    // prompt's 4 blocks, or a pair together when one leaves: the test once
    // used 12 blocks, where sequences started 17 tokens apart took turns
    // without one (1 run in 40 beside two busy loops).
    config.kv_cache_tokens = 16 * 9;
    config.swap_space_tokens = 16 * 64;
    config.preemption = *parse_preemption_mode(mode);
    auto e = Engine::create(sys, config, *model_);
    ASSERT_TRUE(e) << e.error().message;
    ScoreCollector collector;
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestSpec spec = scoring_spec(i + 1, prompts[i], 2);
      spec.request.sampling.max_tokens = 48;
      (*e)->submit(std::move(spec), collector.callback_for(i + 1));
    }
    const auto out = collector.wait_for(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Scored& s = out.at(i + 1);
      EXPECT_EQ(s.finish, FinishReason::length) << s.message;
      EXPECT_EQ(s.events_with_scores, 1);
      expect_matches(s.prompt, prompts[i], reference(prompts[i]), 2);
    }
    const EngineStats stats = *(*e)->stats();
    EXPECT_GT(stats.preemptions_recompute + stats.preemptions_swap, 0u);
    testing::expect_all_blocks_free(**e);
  }
}

TEST_F(PromptLogprobs, OutOfRangeIsRefused) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto e = engine(sys, 16);
  const Scored s = run_one(*e, scoring_spec(1, prompt(8), 21));
  EXPECT_EQ(s.finish, FinishReason::error);
  EXPECT_NE(s.message.find("prompt_logprobs must be between 0 and 20"), std::string::npos) << s.message;
}

// A runner that does not score prompts (the CUDA runner's case; here the
// fake one) never gets such a plan: the request is refused, saying why.
TEST(PromptLogprobsRefused, ByARunnerThatDoesNotScore) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto e = testing::make_fake_engine(sys, EngineConfig{});
  ASSERT_NE(e, nullptr);
  const Scored s = run_one(*e, scoring_spec(1, {1, 2, 3}, 0));
  EXPECT_EQ(s.finish, FinishReason::error);
  EXPECT_NE(s.message.find("does not compute prompt logprobs"), std::string::npos) << s.message;
  EXPECT_EQ(run_one(*e, scoring_spec(2, {1, 2, 3}, -1)).finish, FinishReason::length);
}

// ---- against llama.cpp ------------------------------------------------------------

struct ReferencePrompt {
  std::vector<int32_t> tokens;
  std::vector<std::vector<std::pair<int32_t, double>>> topk;  // per position: (id, logprob), best first
};

std::vector<ReferencePrompt> read_llama_cpp(const std::string& path) {
  std::vector<ReferencePrompt> out;
  std::ifstream in(path);
  std::string line;
  simdjson::dom::parser parser;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    simdjson::dom::element doc = parser.parse(line);
    ReferencePrompt p;
    for (int64_t t : doc["prompt"].get_array()) p.tokens.push_back(int32_t(t));
    std::vector<double> lse;
    for (double l : doc["lse"].get_array()) lse.push_back(l);
    for (simdjson::dom::element pos : doc["topk"].get_array()) {
      const double norm = lse[p.topk.size()];
      auto& row = p.topk.emplace_back();
      for (simdjson::dom::element pair : pos.get_array()) {
        simdjson::dom::array a = pair.get_array();
        row.emplace_back(int32_t(int64_t(a.at(0))), double(a.at(1)) - norm);
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

struct LlamaCase {
  const char* file;
  double tolerance;  // tests/model/llama_cpp_reference_test.cpp's, from the same measurements
};

class PromptLogprobsVsLlamaCpp : public ::testing::TestWithParam<LlamaCase> {};

// Every prompt of the reference file through the engine with prompt_logprobs
// 20, in 8-token chunks: wherever llama.cpp's top 10 and ours (top 20 and the
// prompt's own token) name the same token, the logprobs agree within the
// file's tolerance; and llama.cpp's best token, where it leads clearly, is ours.
TEST_P(PromptLogprobsVsLlamaCpp, AgreePositionByPosition) {
  const LlamaCase c = GetParam();
  const std::string dir = CONVEYOR_SHARED_MODELS;
  const std::string model_path = dir + "/" + c.file + ".gguf";
  if (!std::filesystem::exists(model_path)) GTEST_SKIP() << model_path << " is not there";
  auto model = load_model(model_path);
  ASSERT_TRUE(model) << model.error().message;
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.threads = 2;
  config.prefill_chunk = 8;
  auto engine = Engine::create(sys, config, std::move(*model));
  ASSERT_TRUE(engine) << engine.error().message;
  double worst = 0, sum = 0;
  int compared = 0, positions = 0, leads = 0, leads_agreed = 0;
  const auto prompts = read_llama_cpp(dir + "/reference/" + c.file + ".jsonl");
  ASSERT_FALSE(prompts.empty());
  for (size_t k = 0; k < prompts.size(); ++k) {
    const ReferencePrompt& ref = prompts[k];
    const Scored s = run_one(**engine, scoring_spec(k + 1, ref.tokens, 20));
    ASSERT_EQ(s.prompt.size(), ref.tokens.size() - 1) << s.message;
    for (size_t i = 0; i + 1 < ref.tokens.size(); ++i) {
      const PromptLogprob& ours = s.prompt[i];
      std::map<int32_t, double> mine{{ours.token, ours.logprob}};
      for (const TokenLogprob& t : ours.top) mine.emplace(t.token, t.logprob);
      const auto& theirs = ref.topk[i];
      for (size_t j = 0; j < 10 && j < theirs.size(); ++j) {
        auto it = mine.find(theirs[j].first);
        if (it == mine.end()) continue;
        const double err = std::abs(it->second - theirs[j].second);
        worst = std::max(worst, err);
        sum += err;
        ++compared;
      }
      ++positions;
      if (theirs[0].second - theirs[1].second > c.tolerance) {
        ++leads;
        leads_agreed += ours.top.front().token == theirs[0].first;
      }
    }
  }
  std::cout << c.file << ": " << positions << " prompt positions, " << compared
            << " logprobs compared, max |error| " << worst << ", mean " << (compared ? sum / compared : 0.0)
            << ", best token " << leads_agreed << "/" << leads << " where llama.cpp's leads by > " << c.tolerance
            << "\n";
  EXPECT_GT(compared, positions * 9);  // nearly all of llama.cpp's top 10 are in ours
  EXPECT_LE(worst, c.tolerance);
  EXPECT_EQ(leads_agreed, leads);
}

INSTANTIATE_TEST_SUITE_P(Files, PromptLogprobsVsLlamaCpp,
                         ::testing::Values(LlamaCase{"tiny-llama2-q8_0", 0.2}, LlamaCase{"tiny-llama2-q4_0", 0.2},
                                           LlamaCase{"tiny-llama2-q4_k_m", 0.5},
                                           LlamaCase{"tiny-llama3-q4_k_m", 0.5},
                                           LlamaCase{"tiny-qwen2-q4_k_m", 0.5}),
                         [](const auto& info) {
                           std::string name = info.param.file;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace conveyor
