// Speculative decoding through the whole actor engine (engine/speculation.hpp):
// verify steps on the fake backend, whose cyclic model makes the ngram
// drafts hit and miss and whose tokens read back every KV slot they depend
// on (so a rejected draft's KV that was read, or a position not rewritten,
// changes the output), under swap and recompute preemption and with n > 1;
// then stories260K, greedy and seeded sampling, the same ids with and
// without speculation.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <filesystem>
#include <random>

#include "grammar/json_schema.hpp"

#include "tests/actors/engine_test_util.hpp"
#include "tests/actors/fake_backend.hpp"
#include "tests/actors/fake_engine.hpp"
#include "tests/actors/stories_fixture.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

using testing::Collector;
using testing::EngineSystemConfig;
using testing::expect_all_blocks_free;
using testing::kFakeContext;
using testing::kFakeVocab;
using testing::random_prompts;


EngineConfig speculative(EngineConfig c, int32_t tokens = 4) {
  c.speculative.method = SpeculativeMethod::ngram;
  c.speculative.num_tokens = tokens;
  c.speculative.disable_batch = 1024;  // every decoding sequence drafts
  return c;
}

// Runs `prompts` (seed 0: greedy; else seeded, n samples) on the cyclic fake
// model and checks every sample's tokens against the model run one token at a time.
EngineStats expect_fake_outputs(EngineConfig config, const std::vector<std::vector<int32_t>>& prompts,
                                int32_t max_tokens, int32_t n = 1) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<testing::FakeRunner> runner;
  std::shared_ptr<testing::GatedRunner> gate;  // all requests in before the first step (preemption tests)
  auto engine = testing::make_fake_engine(sys, config, false, &runner, testing::gated(gate));
  if (engine == nullptr) return {};
  runner->set_cyclic(true);
  Collector collector;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestSpec spec = testing::greedy_spec(0, prompts[i], max_tokens);
    spec.request.n = n;
    if (n > 1) {
      spec.request.sampling.has_seed = true;
      spec.request.sampling.seed = 1000 + i;
    }
    engine->submit(spec, collector.callback_for(100 * (i + 1)));
  }
  gate->open();
  EXPECT_TRUE(collector.wait_for(prompts.size() * size_t(n)));
  const auto outcomes = collector.outcomes();
  const std::vector<int32_t> eos = {0};
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (int32_t k = 0; k < n; ++k) {
      const testing::Outcome& o = outcomes.at(100 * (i + 1) + uint64_t(k));
      EXPECT_EQ(o.finals, 1);
      EXPECT_NE(o.finish, FinishReason::error) << o.message;
      const uint64_t seed = n > 1 ? 1000 + i + uint64_t(k) : 0;
      EXPECT_EQ(o.tokens, testing::expected_tokens(prompts[i], kFakeVocab, max_tokens, eos, kFakeContext, seed,
                                                   /*cyclic=*/true))
          << "request " << i << " sample " << k;
    }
  }
  expect_all_blocks_free(*engine);
  return *engine->stats();
}

TEST(SpeculativeFake, VerifiedDraftsGiveTheModelsOwnTokens) {
  const auto prompts = random_prompts(24, kFakeVocab, 3, 1, 30);
  EngineConfig config;
  config.block_size = 4;  // drafts cross block boundaries often
  const EngineStats plain = expect_fake_outputs(config, prompts, 80);
  EXPECT_EQ(plain.spec_draft_tokens, 0u);
  const EngineStats spec = expect_fake_outputs(speculative(config), prompts, 80);
  // The cycles make most drafts hit; the ones before a cycle closes miss.
  EXPECT_GT(spec.spec_drafts, 0u);
  EXPECT_GT(spec.spec_accepted_tokens, spec.spec_draft_tokens / 4);
  EXPECT_LT(spec.spec_accepted_tokens, spec.spec_draft_tokens);
  EXPECT_EQ(spec.generated_tokens, plain.generated_tokens);
}

TEST(SpeculativeFake, SurvivesPreemptionBySwapAndRecompute) {
  const auto prompts = random_prompts(16, kFakeVocab, 9, 1, 30);
  for (PreemptionMode mode : {PreemptionMode::swap, PreemptionMode::recompute}) {
    SCOPED_TRACE(mode == PreemptionMode::swap ? "swap" : "recompute");
    EngineConfig config = testing::swap_pressure_config();
    config.preemption = mode;
    const EngineStats stats = expect_fake_outputs(speculative(config, 6), prompts, 60);
    EXPECT_GT(stats.preemptions_swap + stats.preemptions_recompute, 0u);
    EXPECT_GT(stats.spec_accepted_tokens, 0u);
  }
}

// Requests that want more tokens than the whole KV cache holds end where
// they would without speculation (finish "length" at the same token), under
// swap and recompute preemption, alone and beside another: drafts never ask
// for slots past the cache, where the sequence could never get them (a
// verify step asked for them once, preempting itself, and a swapped-out
// sequence was never finished). A sequence's tokens fill the cache at most.
TEST(SpeculativeFake, RequestsOutgrowingTheWholeCacheEndAsWithout) {
  for (PreemptionMode mode : {PreemptionMode::swap, PreemptionMode::recompute})
    for (size_t requests : {1, 2}) {
      SCOPED_TRACE(std::string(mode == PreemptionMode::swap ? "swap, " : "recompute, ") +
                   std::to_string(requests) + " requests");
      EngineConfig config;
      config.block_size = 4;
      config.kv_cache_tokens = 4 * 16;
      config.swap_space_tokens = 4 * 64;
      config.preemption = mode;
      const auto prompts = random_prompts(requests, kFakeVocab, 5, 6, 10);
      auto run = [&](const EngineConfig& c) {
        EngineSystemConfig cfg;
        caf::actor_system sys{cfg};
        std::shared_ptr<testing::FakeRunner> runner;
        auto engine = testing::make_fake_engine(sys, c, false, &runner);
        EXPECT_NE(engine, nullptr);
        if (engine == nullptr) return std::map<request_id, testing::Outcome>{};
        runner->set_cyclic(true);
        Collector collector;
        for (size_t i = 0; i < prompts.size(); ++i)
          engine->submit(testing::greedy_spec(0, prompts[i], 200, /*ignore_eos=*/true),
                         collector.callback_for(100 * (i + 1)));
        EXPECT_TRUE(collector.wait_for(prompts.size(), std::chrono::seconds(30))) << "a request never ended";
        expect_all_blocks_free(*engine);
        return collector.outcomes();
      };
      const auto plain = run(config);
      for (SpeculativeMethod method : {SpeculativeMethod::ngram, SpeculativeMethod::suffix}) {
        EngineConfig c = speculative(config, 6);
        c.speculative.method = method;
        const auto spec = run(c);
        ASSERT_EQ(spec.size(), plain.size());
        for (const auto& [id, o] : plain) {
          EXPECT_EQ(o.finish, FinishReason::length) << o.message;
          EXPECT_EQ(prompts[id / 100 - 1].size() + o.tokens.size(), size_t(config.kv_cache_tokens));
          EXPECT_EQ(spec.at(id).finish, o.finish) << spec.at(id).message;
          EXPECT_EQ(spec.at(id).tokens, o.tokens) << "request " << id / 100;
        }
      }
    }
}

TEST(SpeculativeFake, SamplesOfOnePromptDraftAlone) {
  const auto prompts = random_prompts(6, kFakeVocab, 21, 3, 20);
  EngineConfig config;
  config.block_size = 4;
  const EngineStats stats = expect_fake_outputs(speculative(config), prompts, 50, /*n=*/3);
  EXPECT_GT(stats.spec_accepted_tokens, 0u);
}

// --speculative suffix: a request whose prompt an earlier request had
// drafts from that request's output at once (an agent's repeated calls);
// ngram alone only once its own output repeats.
TEST(SpeculativeFake, SuffixDraftsFromRecentRequests) {
  const auto prompts = random_prompts(8, kFakeVocab, 33, 5, 20);
  auto second_wave_accepted = [&](SpeculativeMethod method) {
    EngineConfig config = speculative(EngineConfig{});
    config.speculative.method = method;
    EngineSystemConfig cfg;
    caf::actor_system sys{cfg};
    std::shared_ptr<testing::FakeRunner> runner;
    auto engine = testing::make_fake_engine(sys, config, false, &runner);
    runner->set_cyclic(true);
    uint64_t accepted_before = 0;
    for (int wave = 0; wave < 2; ++wave) {
      Collector collector;
      for (size_t i = 0; i < prompts.size(); ++i)
        engine->submit(testing::greedy_spec(i + 1, prompts[i], 40), collector.callback_for(i + 1));
      EXPECT_TRUE(collector.wait_for(prompts.size()));
      const std::vector<int32_t> eos = {0};
      for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(collector.outcomes().at(i + 1).tokens,
                  testing::expected_tokens(prompts[i], kFakeVocab, 40, eos, kFakeContext, 0, true));
      if (wave == 0) accepted_before = engine->stats()->spec_accepted_tokens;
    }
    return engine->stats()->spec_accepted_tokens - accepted_before;
  };
  const uint64_t ngram = second_wave_accepted(SpeculativeMethod::ngram);
  const uint64_t suffix = second_wave_accepted(SpeculativeMethod::suffix);
  EXPECT_GT(suffix, ngram + 20) << "ngram " << ngram << ", suffix " << suffix;
}

// Past disable_batch decoding sequences, nobody drafts.
TEST(SpeculativeFake, LargeBatchesDraftNothing) {
  const auto prompts = random_prompts(24, kFakeVocab, 5, 1, 10);
  EngineConfig config = speculative(EngineConfig{});
  config.speculative.disable_batch = 1;
  config.max_num_seqs = 24;
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<testing::FakeRunner> runner;
  auto engine = testing::make_fake_engine(sys, config, false, &runner);
  ASSERT_NE(engine, nullptr);
  runner->set_cyclic(true);
  Collector collector;
  // All admitted in the first iteration, they decode together to the end.
  for (size_t i = 0; i < prompts.size(); ++i)
    engine->submit(testing::greedy_spec(i + 1, prompts[i], 30, /*ignore_eos=*/true), collector.callback_for(i + 1));
  ASSERT_TRUE(collector.wait_for(prompts.size()));
  EXPECT_LT(engine->stats()->spec_drafts, 24u);  // only while a few stragglers were left, if ever
}

// ---- stories260K ---------------------------------------------------------------

class SpeculativeStories : public testing::StoriesTest {
 protected:
  std::map<request_id, testing::Outcome> run(EngineConfig config, const std::vector<RequestSpec>& specs,
                                             EngineStats* stats = nullptr) {
    EngineSystemConfig cfg;
    caf::actor_system sys{cfg};
    config.threads = 1;
    auto engine = Engine::create(sys, config, *model_);
    EXPECT_TRUE(engine.has_value()) << engine.error().message;
    Collector collector;
    size_t samples = 0;
    for (const RequestSpec& spec : specs) {
      (*engine)->submit(spec, collector.callback_for(spec.request.id * 16));
      samples += size_t(spec.request.n);
    }
    EXPECT_TRUE(collector.wait_for(samples));
    if (stats != nullptr) *stats = *(*engine)->stats();
    expect_all_blocks_free(**engine);
    return collector.outcomes();
  }

  static std::vector<RequestSpec> specs(bool sampled) {
    std::vector<RequestSpec> out;
    auto prompts = random_prompts(8, 512, 17, 2, 40);
    for (size_t i = 0; i < prompts.size(); ++i) {
      prompts[i][0] = 1;  // BOS
      RequestSpec spec = testing::greedy_spec(i + 1, prompts[i], 120, /*ignore_eos=*/true);
      if (sampled) {
        spec.request.sampling.temperature = 0.8f;
        spec.request.sampling.top_p = 0.95f;
        spec.request.sampling.frequency_penalty = 0.3f;
        spec.request.sampling.has_seed = true;
        spec.request.sampling.seed = 7 + i;
        spec.request.n = i % 3 == 0 ? 2 : 1;
      }
      out.push_back(std::move(spec));
    }
    return out;
  }
};

// Greedy and seeded sampled outputs are the same ids with and without
// speculation: every emitted token is the sampler's own draw.
TEST_F(SpeculativeStories, OutputsAreThoseOfPlainDecoding) {
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled" : "greedy");
    EngineConfig config;
    config.kv_cache_dtype = KvDtype::f32;
    EngineStats plain_stats, spec_stats;
    const auto plain = run(config, specs(sampled), &plain_stats);
    const auto spec = run(speculative(config), specs(sampled), &spec_stats);
    ASSERT_EQ(plain.size(), spec.size());
    for (const auto& [id, o] : plain) {
      EXPECT_EQ(spec.at(id).tokens, o.tokens) << "request " << id / 16 << " sample " << id % 16;
      EXPECT_EQ(spec.at(id).finish, FinishReason::length);
    }
    EXPECT_GT(spec_stats.spec_draft_tokens, 0u);
    // A small model's greedy output repeats itself: drafts hit. (Not the
    // iteration count: how the requests' arrivals fall into batches moves it
    // by more than this batch's drafting saves, and drafting stops once 4
    // sequences run; the fake model's tests count the steps saved.)
    if (!sampled) {
      EXPECT_GT(spec_stats.spec_accepted_tokens, 0u);
    }
  }
}

// ---- jump-forward under a grammar -------------------------------------------------

// On the random GGUF model (a real 32k vocabulary): a JSON schema's forced
// bytes (`{"name":"`, `lpha"` after `"a`, ...) are verified as drafts, so a
// constrained request takes fewer steps, and its output (greedy, and seeded
// at temperature 1) is the same as without jump-forward, and valid.
TEST(JumpForward, ForcedBytesAreVerifiedInOneStepAndChangeNothing) {
  const std::string path = test::shared_model_path("tiny-random-llama-f32.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto loaded = load_model(path);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  const LoadedModel& model = *loaded;
  auto schema = grammar::grammar_from_json_schema(
      R"({"type":"object","properties":{"name":{"enum":["alpha","beta gamma"]},)"
      R"("count":{"type":"integer","minimum":0,"maximum":99},"ok":{"type":"boolean"},)"
      R"("tags":{"type":"array","items":{"enum":["red","green"]},"maxItems":3}},)"
      R"("required":["name","count","ok","tags"]})");
  ASSERT_TRUE(schema.has_value()) << schema.error().message;
  const auto ir = std::make_shared<const grammar::Grammar>(std::move(schema).value());
  const std::vector<int32_t> prompt = model.tokenizer->encode("Give me a record:", /*add_bos=*/true);

  auto run = [&](bool jump_forward, float temperature, EngineStats& stats,
                 SpeculativeMethod method = SpeculativeMethod::none) {
    EngineSystemConfig cfg;
    caf::actor_system sys{cfg};
    EngineConfig config;
    config.threads = 1;
    config.speculative.jump_forward = jump_forward;
    config.speculative.method = method;
    auto engine = Engine::create(sys, config, model);
    EXPECT_TRUE(engine.has_value()) << engine.error().message;
    Collector collector;
    for (uint64_t i = 0; i < 3; ++i) {
      RequestSpec spec = testing::greedy_spec(i + 1, prompt, 200);
      spec.request.sampling.temperature = temperature;
      spec.request.sampling.has_seed = true;
      spec.request.sampling.seed = 11 + i;
      spec.request.sampling.grammar.ir = ir;
      spec.tokenizer = model.tokenizer;
      (*engine)->submit(spec, collector.callback_for(i + 1));
    }
    EXPECT_TRUE(collector.wait_for(3));
    stats = *(*engine)->stats();
    return collector.outcomes();
  };
  for (float temperature : {0.0f, 1.0f}) {
    SCOPED_TRACE(temperature);
    EngineStats plain_stats, jump_stats, ngram_stats;
    const auto plain = run(false, temperature, plain_stats);
    const auto jumped = run(true, temperature, jump_stats);
    // ngram drafts too, cut at the first token the grammar refuses.
    const auto both = run(true, temperature, ngram_stats, SpeculativeMethod::ngram);
    EXPECT_EQ(plain_stats.spec_drafts, 0u);
    for (const auto& [id, o] : plain) {
      EXPECT_EQ(o.finish, FinishReason::stop) << o.message;
      EXPECT_EQ(jumped.at(id).tokens, o.tokens) << "request " << id;
      EXPECT_EQ(both.at(id).tokens, o.tokens) << "request " << id;
      boost::system::error_code ec;
      const boost::json::value v = boost::json::parse(o.text, ec);
      ASSERT_FALSE(ec) << o.text;
      EXPECT_TRUE(v.as_object().contains("tags")) << o.text;
    }
    // Each accepted draft is a token that took no step of its own. (Random
    // weights choose among a forced string's tokenizations at random: about
    // a third of the drafts were accepted. Iteration counts are not
    // compared: they depend on when the requests arrive.)
    EXPECT_GT(jump_stats.spec_accepted_tokens, 0u);
  }
}

// ---- a draft model (--speculative draft:FILE) ---------------------------------------

// Runs `prompts` on `model` (request i: lengths[i] new tokens, EOS ignored;
// sampled: temperature 1, seeded, n = 2), drafted by the file `draft` (none:
// plain decoding) while at most `disable_batch` sequences decode. Outcomes
// by 16 * (i + 1) + sample. Under swap pressure the KV cache holds about
// half of what the requests want, and preemption swaps.
std::map<request_id, testing::Outcome> run_drafted(const LoadedModel& model,
                                                   const std::vector<std::vector<int32_t>>& prompts,
                                                   const std::vector<int32_t>& lengths, const std::string& draft,
                                                   int32_t disable_batch, bool sampled, EngineStats& stats,
                                                   bool swap_pressure = false) {
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.threads = 1;
  config.kv_cache_tokens = 4096;
  config.block_size = 4;  // drafts cross block boundaries often
  if (swap_pressure) {
    config.kv_cache_tokens = 4 * 40;
    config.swap_space_tokens = 4 * 128;
    config.preemption = PreemptionMode::swap;
  }
  if (!draft.empty()) {
    config.speculative.method = SpeculativeMethod::draft;
    config.speculative.draft_model = draft;
    config.speculative.num_tokens = 4;
    config.speculative.disable_batch = disable_batch;
  }
  auto engine = Engine::create(sys, config, model);
  EXPECT_TRUE(engine.has_value()) << engine.error().message;
  if (!engine) return {};
  Collector collector;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestSpec spec = testing::greedy_spec(0, prompts[i], lengths[i], /*ignore_eos=*/true);
    if (sampled) {
      spec.request.sampling.temperature = 1.0f;
      spec.request.sampling.has_seed = true;
      spec.request.sampling.seed = 77 + i;
      spec.request.n = 2;
    }
    (*engine)->submit(spec, collector.callback_for(16 * (i + 1)));
  }
  EXPECT_TRUE(collector.wait_for(prompts.size() * (sampled ? 2 : 1)));
  stats = *(*engine)->stats();
  expect_all_blocks_free(**engine);
  return collector.outcomes();
}

// Each request's ids in `drafted` are those in `plain`, `length` of them.
void expect_same_ids(const std::map<request_id, testing::Outcome>& plain,
                     const std::map<request_id, testing::Outcome>& drafted, size_t length) {
  ASSERT_EQ(plain.size(), drafted.size());
  for (const auto& [id, o] : plain) {
    EXPECT_EQ(o.tokens.size(), length) << "request " << id / 16;
    EXPECT_EQ(drafted.at(id).tokens, o.tokens) << "request " << id / 16;
  }
}

class SpeculativeDraftModel : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = std::string(CONVEYOR_SHARED_MODELS);
    target_path_ = dir + "/tiny-llama2-q4_0.gguf";
    q8_path_ = dir + "/tiny-llama2-q8_0.gguf";
    if (!std::filesystem::exists(target_path_) || !std::filesystem::exists(q8_path_))
      GTEST_SKIP() << "the tiny Llama 2 files are not in " << dir;
    auto loaded = load_model(target_path_);
    ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
    model_ = std::move(loaded).value();
    for (const char* text : {"Once upon a time", "Once upon a time there was", "The little dog", "A"})
      prompts_.push_back(model_.tokenizer->encode(text, /*add_bos=*/true));
  }
  // stories260K (trained weights, whose next token depends on the context)
  // into stories_; false when the file is missing.
  bool load_stories() {
    stories_path_ = test::shared_model_path("stories260K.bin");
    if (!std::filesystem::exists(stories_path_)) return false;
    auto loaded = load_model(stories_path_);
    EXPECT_TRUE(loaded.has_value()) << loaded.error().message;
    if (!loaded) return false;
    stories_ = std::move(loaded).value();
    return true;
  }

  // Runs `prompts` (`length` new tokens each, greedy) on stories260K plainly
  // and drafted by itself: the ids are the same and at least 97% of the
  // drafts are accepted. The drafted run's stats, its outcomes in `drafted`.
  EngineStats expect_stories_self_drafted_as_plain(const std::vector<std::vector<int32_t>>& prompts, int32_t length,
                                                   bool swap_pressure,
                                                   std::map<request_id, testing::Outcome>* drafted = nullptr) {
    const std::vector<int32_t> lengths(prompts.size(), length);
    EngineStats plain_stats, self_stats;
    const auto plain = run_drafted(stories_, prompts, lengths, "", 1024, false, plain_stats, swap_pressure);
    const auto self = run_drafted(stories_, prompts, lengths, stories_path_, 1024, false, self_stats, swap_pressure);
    expect_same_ids(plain, self, size_t(length));
    EXPECT_GT(self_stats.spec_draft_tokens, 0u);
    EXPECT_GE(self_stats.spec_accepted_tokens * 100, self_stats.spec_draft_tokens * 97);
    if (drafted) *drafted = self;
    return self_stats;
  }

  std::string target_path_, q8_path_, stories_path_;
  LoadedModel model_, stories_;
  std::vector<std::vector<int32_t>> prompts_;
};

// The tiny Llama 2 file as Q4_0 (random weights, a real 32k vocabulary),
// drafted by itself and by the same weights as Q8_0: greedy and seeded
// sampled outputs (n = 2) are the ids of plain decoding either way. Drafting
// by itself, the drafts are the target's own greedy tokens, so nearly all
// are accepted (this checks that the draft cache follows the target's:
// a position it missed would change the drafts). The Q8_0 file's drafts
// rarely match: random weights give flat logits, whose argmax rounding
// moves.
TEST_F(SpeculativeDraftModel, OutputsAreThoseOfPlainDecoding) {
  const std::vector<int32_t> lengths(prompts_.size(), 48);
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled" : "greedy");
    EngineStats plain_stats, self_stats, q8_stats;
    const auto plain = run_drafted(model_, prompts_, lengths, "", 1024, sampled, plain_stats);
    // disable_batch 1024: every decoding sequence drafts.
    const auto self = run_drafted(model_, prompts_, lengths, target_path_, 1024, sampled, self_stats);
    const auto q8 = run_drafted(model_, prompts_, lengths, q8_path_, 1024, sampled, q8_stats);
    ASSERT_EQ(plain.size(), self.size());
    ASSERT_EQ(plain.size(), q8.size());
    for (const auto& [id, o] : plain) {
      EXPECT_EQ(o.tokens.size(), 48u);
      EXPECT_EQ(self.at(id).tokens, o.tokens) << "self-drafted, request " << id / 16 << " sample " << id % 16;
      EXPECT_EQ(q8.at(id).tokens, o.tokens) << "Q8_0-drafted, request " << id / 16 << " sample " << id % 16;
    }
    EXPECT_EQ(plain_stats.spec_draft_tokens, 0u);
    EXPECT_GT(self_stats.spec_draft_tokens, 0u);
    EXPECT_GT(q8_stats.spec_draft_tokens, 0u);
    if (!sampled) {
      EXPECT_GT(self_stats.spec_accepted_tokens * 10, self_stats.spec_draft_tokens * 9);
    }
  }
}

// Nobody drafts while more than two sequences decode; the two longest then
// do, after 24 tokens the draft model never ran over. It catches up on them
// first: self-drafts are still nearly all accepted, and the ids are those of
// plain decoding.
TEST_F(SpeculativeDraftModel, CatchesUpWhenDraftingStartsLate) {
  const std::vector<int32_t> lengths = {16, 24, 40, 64};
  EngineStats plain_stats, self_stats;
  const auto plain = run_drafted(model_, prompts_, lengths, "", 2, false, plain_stats);
  const auto self = run_drafted(model_, prompts_, lengths, target_path_, 2, false, self_stats);
  ASSERT_EQ(plain.size(), self.size());
  for (const auto& [id, o] : plain) {
    EXPECT_EQ(o.tokens.size(), size_t(lengths[id / 16 - 1]));
    EXPECT_EQ(self.at(id).tokens, o.tokens) << "request " << id / 16;
  }
  EXPECT_GT(self_stats.spec_draft_tokens, 0u);
  EXPECT_GT(self_stats.spec_accepted_tokens * 10, self_stats.spec_draft_tokens * 9);
}

// A swap brings back the target's keys and values only: the draft model runs
// over a swapped-in sequence again before it drafts. stories260K drafted by
// itself (trained weights, whose next token depends on the context: with
// random weights a stale cache hardly moves the argmax), under swap pressure:
// the ids are those of plain decoding and self-drafts stay nearly all
// accepted (here all 198; with the stale cache kept, 152 of 170).
TEST_F(SpeculativeDraftModel, RunsAgainOverASequenceThatASwapBroughtBack) {
  if (!load_stories()) GTEST_SKIP() << "stories260K.bin is not in " << CONVEYOR_SHARED_MODELS;
  auto prompts = random_prompts(4, 512, 23, 4, 12);
  for (auto& p : prompts) p[0] = 1;  // BOS
  const EngineStats stats = expect_stories_self_drafted_as_plain(prompts, 64, /*swap_pressure=*/true);
  EXPECT_GT(stats.preemptions_swap, 0u);
}

// Requests that share a 24-token prefix (the prefix cache shares its blocks),
// stories260K drafted by itself: where the draft's cache already holds a
// shared block it is not run again (draft_model_test.cpp), and the drafts
// stay those of a draft model that ran over everything: the ids are those of
// plain decoding and self-drafts stay nearly all accepted.
TEST_F(SpeculativeDraftModel, RequestsSharingAPrefixDraftAsIfEachRanItAll) {
  if (!load_stories()) GTEST_SKIP() << "stories260K.bin is not in " << CONVEYOR_SHARED_MODELS;
  std::vector<int32_t> prefix = random_prompts(1, 512, 31, 24, 24)[0];
  prefix[0] = 1;  // BOS
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 6; ++i) {
    prompts.push_back(prefix);
    prompts.back().push_back(40 + i);
  }
  std::map<request_id, testing::Outcome> self;
  expect_stories_self_drafted_as_plain(prompts, 32, /*swap_pressure=*/false, &self);
  int cached = 0;
  for (const auto& [id, o] : self) cached += o.cached_prompt_tokens > 0 ? 1 : 0;
  EXPECT_GE(cached, 4) << "the requests did not share their prefix's blocks";
}

// The tiny Llama 3 file (4 query heads a kv head of 32: a verify step's
// 5 tokens are 20 rows, a prompt tile's size on AVX-512 CPUs), drafted by
// itself, greedy and seeded, with swap pressure and without: the ids are
// those of plain decoding. Its drafts' positions are computed as decode
// steps compute them (model/batch.hpp), so flat random logits do not
// resolve a near tie otherwise (with the tiles chosen by an item's size,
// as on 2026-12-05, the seeded streams differed).
TEST_F(SpeculativeDraftModel, GroupedHeadsOutputsAreThoseOfPlainDecoding) {
  const std::string path = test::shared_model_path("tiny-llama3-q4_k_m.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto loaded = load_model(path);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  const LoadedModel llama3 = std::move(loaded).value();
  auto prompts = random_prompts(4, 2000, 41, 5, 30);
  const std::vector<int32_t> lengths(prompts.size(), 48);
  for (bool sampled : {false, true})
    for (bool swap_pressure : {false, true}) {
      SCOPED_TRACE(std::string(sampled ? "sampled" : "greedy") + (swap_pressure ? ", swap pressure" : ""));
      EngineStats plain_stats, self_stats;
      const auto plain = run_drafted(llama3, prompts, lengths, "", 1024, sampled, plain_stats, swap_pressure);
      const auto self = run_drafted(llama3, prompts, lengths, path, 1024, sampled, self_stats, swap_pressure);
      ASSERT_EQ(plain.size(), self.size());
      for (const auto& [id, o] : plain) {
        EXPECT_EQ(o.tokens.size(), 48u);
        EXPECT_EQ(self.at(id).tokens, o.tokens) << "request " << id / 16 << " sample " << id % 16;
      }
      EXPECT_GT(self_stats.spec_draft_tokens, 0u);
    }
}

TEST_F(SpeculativeDraftModel, RefusesAModelWithAnotherVocabulary) {
  const std::string draft_path = test::shared_model_path("stories260K.bin");
  if (!std::filesystem::exists(draft_path)) GTEST_SKIP() << "stories260K.bin is not in " << CONVEYOR_SHARED_MODELS;
  EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineConfig config;
  config.threads = 1;
  config.kv_cache_tokens = 1024;
  config.speculative.method = SpeculativeMethod::draft;
  config.speculative.draft_model = draft_path;
  auto engine = Engine::create(sys, config, model_);
  ASSERT_FALSE(engine.has_value());
  EXPECT_NE(engine.error().message.find("the same vocabulary"), std::string::npos) << engine.error().message;
  config.speculative.draft_model = test::shared_model_path("no-such-file.gguf");
  engine = Engine::create(sys, config, model_);
  ASSERT_FALSE(engine.has_value());
  EXPECT_NE(engine.error().message.find("--speculative draft:"), std::string::npos) << engine.error().message;
}

}  // namespace
}  // namespace conveyor
