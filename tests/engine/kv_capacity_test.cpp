// Sizes as the flags take them, MemAvailable, and the KV capacity that
// --kv-cache-tokens, --kv-cache-memory or the available memory give.
#include "engine/kv_capacity.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "tests/actors/engine_test_util.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

TEST(ParseByteSize, UnitsAndNumbers) {
  const std::pair<const char*, int64_t> cases[] = {
      {"4GiB", int64_t(4) << 30},     {"512MiB", int64_t(512) << 20}, {"1.5GB", 1500000000},
      {"1000000", 1000000},           {"0", 0},                       {"7b", 7},
      {"2 KiB", 2048},                {"2k", 2000},                   {"2Ki", 2048},
      {"3mb", 3000000},               {"1.5gi", int64_t(3) << 29},    {"1TiB", int64_t(1) << 40},
      {" 64 MiB ", int64_t(64) << 20}, {"10.9", 10},                  {"0.5KiB", 512},
  };
  for (const auto& [text, bytes] : cases) {
    auto got = parse_byte_size(text);
    ASSERT_TRUE(got.has_value()) << text << ": " << got.error().message;
    EXPECT_EQ(*got, bytes) << text;
  }
}

TEST(ParseByteSize, BadValuesSayWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},          {"GiB", "does not start with a number"},
      {"-4GiB", "negative"},  {"4 gigabytes", "unknown unit"},
      {"4XB", "unknown unit"}, {"1.2.3G", "malformed"},
      {"4 GiB x", "unknown unit"}, {"99999999TiB", "too large"},
  };
  for (const auto& [text, why] : cases) {
    auto got = parse_byte_size(text);
    ASSERT_FALSE(got.has_value()) << text << " parsed as " << *got;
    EXPECT_NE(got.error().message.find(why), std::string::npos) << got.error().message;
    EXPECT_NE(got.error().message.find("examples"), std::string::npos) << got.error().message;
  }
}

TEST(FormatBytes, PicksTheUnit) {
  EXPECT_EQ(format_bytes(900), "900 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(int64_t(4) << 30), "4.0 GiB");
}

TEST(MemAvailable, ReadFromMeminfo) {
  EXPECT_EQ(parse_mem_available("MemTotal:       16303740 kB\nMemFree:          712708 kB\n"
                                "MemAvailable:    9512004 kB\nBuffers:          322184 kB\n"),
            int64_t(9512004) * 1024);
  EXPECT_EQ(parse_mem_available("MemTotal: 1 kB\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: lots\n"), std::nullopt);
  const auto here = read_mem_available();
  ASSERT_TRUE(here.has_value()) << "no MemAvailable in /proc/meminfo";
  EXPECT_GT(*here, 0);
}

KvCapacityRequest request(int64_t token_bytes) {
  KvCapacityRequest r;
  r.token_bytes = token_bytes;
  r.block_size = 16;
  r.context_length = 512;
  r.max_num_seqs = 256;
  return r;
}

TEST(PlanKvCapacity, ExplicitTokensWin) {
  KvCapacityRequest r = request(1000);
  r.tokens = 1000;  // rounded down to 62 blocks
  r.available = int64_t(1) << 40;
  auto c = plan_kv_capacity(r);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->tokens, 992);
  EXPECT_EQ(c->bytes, 992 * 1000);
  EXPECT_EQ(c->origin, "--kv-cache-tokens");
}

TEST(PlanKvCapacity, MemoryGivesWholeBlocks) {
  KvCapacityRequest r = request(640);  // stories260K in bf16: 5 layers · 2 · 4 heads · 8 · 2 bytes
  r.memory = int64_t(1) << 20;         // 1 MiB / (16 · 640 B) = 102.4 blocks
  auto c = plan_kv_capacity(r);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->tokens, 102 * 16);
  EXPECT_EQ(c->bytes, 102 * 16 * 640);
  r.memory = 10000;  // less than one block
  auto none = plan_kv_capacity(r);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message.find("--kv-cache-memory"), std::string::npos);
  EXPECT_NE(none.error().message.find("holds no block"), std::string::npos);
}

TEST(PlanKvCapacity, DefaultIsAFractionOfAvailableMemoryWithinBounds) {
  KvCapacityRequest r = request(1024);
  r.available = int64_t(64) << 20;  // half of it: 32 MiB = 32768 tokens of 1 KiB
  auto c = plan_kv_capacity(r);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->tokens, 32768);
  EXPECT_EQ(c->origin, "50% of 64.0 MiB available");
  r.fraction = 0.25;
  EXPECT_EQ(plan_kv_capacity(r)->tokens, 16384);
  r.fraction = 0.5;
  // Plenty of memory: no more than 256 sequences of the full context.
  r.available = int64_t(1) << 40;
  c = plan_kv_capacity(r);
  EXPECT_EQ(c->tokens, 512 * 256);
  EXPECT_NE(c->origin.find("capped at context 512 x 256 sequences"), std::string::npos) << c->origin;
  // Almost none: still one full context.
  r.available = 256 << 10;
  c = plan_kv_capacity(r);
  EXPECT_EQ(c->tokens, 512);
  EXPECT_NE(c->origin.find("raised to one full context"), std::string::npos) << c->origin;
  // Unknown: the old fixed default.
  r.available.reset();
  EXPECT_EQ(plan_kv_capacity(r)->tokens, 65536);
}

// A program's EngineConfig gets the checks the CLI's flags get: 100,000
// threads made libgomp end the host process.
TEST(EngineConfigValidation, ThreadsWithinRange) {
  EngineConfig c;
  for (int threads : {0, 1, kMaxThreads}) {
    c.threads = threads;
    EXPECT_TRUE(validate(c).is_ok()) << threads;
  }
  for (int threads : {-1, kMaxThreads + 1, 100000}) {
    c.threads = threads;
    ASSERT_FALSE(validate(c).is_ok()) << threads;
    EXPECT_NE(validate(c).error().message.find("--threads"), std::string::npos);
  }
}

TEST(EngineConfigValidation, CapacityAndDtypeFlags) {
  EngineConfig c;
  EXPECT_TRUE(validate(c).is_ok());
  c.kv_cache_tokens = 4096;
  c.kv_cache_memory = 1 << 20;
  ASSERT_FALSE(validate(c).is_ok());
  EXPECT_NE(validate(c).error().message.find("not both"), std::string::npos);
  c.kv_cache_tokens = 0;
  EXPECT_TRUE(validate(c).is_ok());
  c.kv_cache_memory = -1;
  EXPECT_FALSE(validate(c).is_ok());
  c = EngineConfig{};
  EXPECT_FALSE(parse_kv_cache_dtype("f8"));
  for (const char* d : {"f32", "f16", "bf16", "q8_0"}) {
    c.kv_cache_dtype = *parse_kv_cache_dtype(d);
    EXPECT_TRUE(validate(c).is_ok());
    EXPECT_EQ(to_string(kv_dtype_of(c)), std::string(d));
  }
  c.device = DeviceSpec{DeviceKind::cuda, 0};  // q8_0 on CUDA too
  EXPECT_TRUE(validate(c).is_ok()) << validate(c).error().message;
  c.device = DeviceSpec{};
  c.kv_cache_dtype = *parse_kv_cache_dtype("auto");
  EXPECT_FALSE(c.kv_cache_dtype.has_value());
  EXPECT_EQ(kv_dtype_of(c), __builtin_cpu_supports("avx512bf16") ? KvDtype::bf16 : KvDtype::f16);
  c.kv_cache_memory_fraction = 0.0;
  EXPECT_FALSE(validate(c).is_ok());
}

// Settings of the config file alone are named as its keys (there is no
// --session-ttl flag to point at); aging may be off (0), not negative.
TEST(EngineConfigValidation, FileOnlySettingsNameTheirKeys) {
  EngineConfig c;
  c.session_ttl_seconds = 0;
  ASSERT_FALSE(validate(c).is_ok());
  EXPECT_EQ(validate(c).error().message.rfind("engine.session_ttl_seconds: ", 0), 0u) << validate(c).error().message;
  c = EngineConfig{};
  c.session_max_share = 2;
  ASSERT_FALSE(validate(c).is_ok());
  EXPECT_EQ(validate(c).error().message.rfind("engine.session_max_share: ", 0), 0u);
  c = EngineConfig{};
  c.aging_interval_seconds = 0;
  EXPECT_TRUE(validate(c).is_ok());
  for (double bad : {-1.0, std::nan("")}) {
    c.aging_interval_seconds = bad;
    ASSERT_FALSE(validate(c).is_ok()) << bad;
    EXPECT_EQ(validate(c).error().message.rfind("engine.aging_interval_seconds: ", 0), 0u);
  }
}

// The engine sizes its cache from --kv-cache-memory: whole blocks of the
// model's token bytes in the chosen dtype.
TEST(EngineKvCapacity, MemoryFlagGivesTheExpectedTokens) {
  auto model = load_model("dummy:tiny");  // 4 layers, 4 KV heads of 8: 256 values per token
  ASSERT_TRUE(model.has_value()) << model.error().message;
  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  for (auto [dtype, token_bytes] : {std::pair{"f32", 1024}, std::pair{"bf16", 512}, std::pair{"f16", 512}}) {
    EngineConfig c;
    c.threads = 1;
    c.kv_cache_dtype = *parse_kv_cache_dtype(dtype);
    c.kv_cache_memory = int64_t(1) << 20;
    auto engine = Engine::create(sys, c, *model);
    ASSERT_TRUE(engine.has_value()) << engine.error().message;
    const int64_t tokens = (int64_t(1) << 20) / (16 * token_bytes) * 16;
    EXPECT_EQ((*engine)->kv_capacity().tokens, tokens) << dtype;
    EXPECT_EQ((*engine)->kv_capacity().bytes, tokens * token_bytes) << dtype;
    EXPECT_EQ((*engine)->num_blocks(), tokens / 16) << dtype;
    EXPECT_EQ((*engine)->config().kv_cache_tokens, tokens) << dtype;
    EXPECT_EQ(to_string((*engine)->config().kv_cache_dtype), dtype);
  }
  // Neither flag: from the available memory, at least one context, at most
  // context × max_num_seqs.
  EngineConfig c;
  c.threads = 1;
  c.max_num_seqs = 4;
  auto engine = Engine::create(sys, c, *model);
  ASSERT_TRUE(engine.has_value()) << engine.error().message;
  EXPECT_GE((*engine)->kv_capacity().tokens, model->config.context_length);
  EXPECT_LE((*engine)->kv_capacity().tokens, int64_t(model->config.context_length) * 4);
  EXPECT_TRUE((*engine)->config().kv_cache_dtype.has_value());  // "auto" resolved
}

// q8_0 on a file whose heads are 32 wide: the cache holds 34 bytes per 32
// values, and requests decode through it. Where the blocks lie does not
// matter: a pool eight times larger, whose free list hands out other block
// ids, gives the same tokens.
TEST(EngineKvCapacity, Q8CacheHoldsBlocksOf34BytesAndServes) {
  const std::string path = test::shared_model_path("tiny-llama2-q4_0.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found (see ../shared/models/README.md)";
  auto model = load_model(path);
  ASSERT_TRUE(model.has_value()) << model.error().message;
  const ModelConfig& m = model->config;
  const int64_t token_bytes = int64_t(m.n_layers) * 2 * m.kv_dim() / 32 * 34;
  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 6; ++i) prompts.push_back({1, 300 + 7 * i, 1200 + i, 40 + 3 * i, 999});
  std::vector<std::map<request_id, testing::Outcome>> runs;
  for (int64_t memory : {int64_t(1) << 20, int64_t(8) << 20}) {
    EngineConfig c;
    c.threads = 1;
    c.kv_cache_dtype = KvDtype::q8_0;
    c.kv_cache_memory = memory;
    auto engine = Engine::create(sys, c, *model);
    ASSERT_TRUE(engine.has_value()) << engine.error().message;
    const int64_t tokens = memory / (16 * token_bytes) * 16;
    EXPECT_EQ((*engine)->kv_capacity().tokens, tokens);
    EXPECT_EQ((*engine)->kv_capacity().bytes, tokens * token_bytes);
    runs.push_back(testing::run_greedy(**engine, prompts, 24, /*ignore_eos=*/true));
    for (const auto& [id, o] : runs.back()) {
      EXPECT_EQ(o.finish, FinishReason::length) << o.message;
      EXPECT_EQ(o.tokens.size(), 24u);
    }
  }
  for (const auto& [id, o] : runs[0]) EXPECT_EQ(runs[1].at(id).tokens, o.tokens) << id;
}

}  // namespace
}  // namespace conveyor
