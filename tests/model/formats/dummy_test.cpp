#include "model/formats/dummy.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

std::string read_text(const std::string& path) {
  const std::vector<uint8_t> b = test::read_bytes(path);
  return std::string(b.begin(), b.end());
}

TEST(Dummy, Llama15mHasItsShape) {
  auto m = load_model("dummy:llama-15m");
  ASSERT_TRUE(m) << m.error().message;
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.name, "llama-15m");
  EXPECT_EQ(c.dim, 288);
  EXPECT_EQ(c.hidden_dim, 768);
  EXPECT_EQ(c.n_layers, 6);
  EXPECT_EQ(c.n_heads, 6);
  EXPECT_EQ(c.n_kv_heads, 6);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.context_length, 256);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_TRUE(weights_match(c, m->weights));
  EXPECT_EQ(m->tokenizer, nullptr);
  EXPECT_TRUE(m->eos_ids.empty());
  // Weights are a function of the seed.
  LoadOptions options;
  options.seed = 0;
  auto again = load_model("dummy:llama-15m", options);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->weights.layers[5].w2.values, m->weights.layers[5].w2.values);
  options.seed = 1;
  auto other = load_model("dummy:llama-15m", options);
  ASSERT_TRUE(other);
  EXPECT_NE(other->weights.layers[5].w2.values, m->weights.layers[5].w2.values);
}

TEST(Dummy, ShippedConfigsParse) {
  const std::string dir = std::string(CONVEYOR_SOURCE_DIR) + "/configs/models/";
  auto big = parse_dummy_config(read_text(dir + "llama-110m.toml"), "llama-110m.toml", "llama-110m");
  ASSERT_TRUE(big) << big.error().message;
  EXPECT_EQ(big->model.dim, 768);
  EXPECT_EQ(big->model.hidden_dim, 2048);
  EXPECT_EQ(big->model.n_layers, 12);
  EXPECT_EQ(big->model.n_heads, 12);
  EXPECT_EQ(big->model.n_kv_heads, 12);
  EXPECT_EQ(big->model.context_length, 1024);
  EXPECT_EQ(big->model.vocab_size, 32000);
  auto tiny = load_model("dummy:tiny");
  ASSERT_TRUE(tiny) << tiny.error().message;
  EXPECT_EQ(tiny->config.vocab_size, 258);
  EXPECT_EQ(tiny->config.n_kv_heads, 4);
  ASSERT_NE(tiny->tokenizer, nullptr);
  EXPECT_EQ(tiny->tokenizer->encode("A", true), (std::vector<int32_t>{256, 65}));
  EXPECT_EQ(tiny->eos_ids, std::vector<int32_t>{257});
}

TEST(Dummy, NamesMustBePlain) {
  for (const char* spec : {"dummy:../x", "dummy:", "dummy:/etc/passwd", "dummy:a/b",
                           "dummy:.hidden", "dummy:x y"}) {
    auto m = load_model(spec);
    ASSERT_FALSE(m) << spec;
    EXPECT_EQ(m.error().code, Errc::invalid_argument) << spec;
    EXPECT_NE(m.error().message.find("plain name"), std::string::npos) << m.error().message;
  }
  auto unknown = load_model("dummy:no-such-model");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, Errc::invalid_argument);
  EXPECT_NE(unknown.error().message.find("no no-such-model.toml in"), std::string::npos)
      << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("configs/models"), std::string::npos);
}

TEST(Dummy, SearchesConfigDirsThenEnvironment) {
  test::TempDir first, env;
  test::write_bytes(first.file("mine.toml"),
                    {'d', 'i', 'm', '=', '1', '6', '\n'});  // incomplete: first wins, so error
  const std::string good =
      "dim = 16\nhidden_dim = 32\nn_layers = 1\nn_heads = 2\nvocab_size = 300\n"
      "context_length = 64\ntokenizer = \"bytes\"\nname = \"mine\"\n";
  test::write_bytes(env.file("mine.toml"), std::vector<uint8_t>(good.begin(), good.end()));
  ::setenv("CONVEYOR_CONFIG_DIR", env.file("").c_str(), 1);
  auto from_env = load_model("dummy:mine");
  LoadOptions options;
  options.config_dirs = {first.file("")};
  auto from_dirs = load_model("dummy:mine", options);
  ::unsetenv("CONVEYOR_CONFIG_DIR");
  ASSERT_TRUE(from_env) << from_env.error().message;
  EXPECT_EQ(from_env->config.n_kv_heads, 2);  // defaults to n_heads
  EXPECT_EQ(from_env->config.rope_theta, 10000.0f);
  EXPECT_EQ(from_env->config.vocab_size, 300);
  ASSERT_NE(from_env->tokenizer, nullptr);
  ASSERT_TRUE(from_env->vocabulary);
  EXPECT_EQ(from_env->vocabulary->pieces.size(), 300u);
  ASSERT_FALSE(from_dirs);
  EXPECT_NE(from_dirs.error().message.find("missing required field 'hidden_dim'"),
            std::string::npos)
      << from_dirs.error().message;
}

void expect_config_error(const std::string& toml, const std::string& needle) {
  auto c = parse_dummy_config(toml, "x.toml", "x");
  ASSERT_FALSE(c) << "accepted: " << toml;
  EXPECT_EQ(c.error().code, Errc::bad_format);
  EXPECT_NE(c.error().message.find("x.toml"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find(needle), std::string::npos) << c.error().message;
}

TEST(Dummy, ConfigErrorsNameTheField) {
  const std::string base =
      "hidden_dim = 32\nn_layers = 1\nn_heads = 2\nvocab_size = 300\ncontext_length = 64\n";
  EXPECT_TRUE(parse_dummy_config("dim = 16\n" + base, "x.toml", "x"));
  expect_config_error(base, "missing required field 'dim'");
  expect_config_error("dim = \"16\"\n" + base, "field 'dim' must be an integer");
  expect_config_error("dim = 16.5\n" + base, "field 'dim' must be an integer");
  expect_config_error("dim = 99999999999\n" + base, "field 'dim' is out of range");
  expect_config_error("dim = 16\ndimm = 3\n" + base, "unknown field 'dimm'");
  expect_config_error("dim = 16\nrope_theta = \"big\"\n" + base, "field 'rope_theta' must be a number");
  expect_config_error("dim = 16\ntied_embeddings = 1\n" + base, "'tied_embeddings' must be true or false");
  expect_config_error("dim = 16\ntokenizer = \"sentencepiece\"\n" + base, "'tokenizer' must be");
  expect_config_error("dim = 15\n" + base, "n_heads 2 does not divide dim 15");
  expect_config_error("dim = 16\nn_kv_heads = 0\n" + base, "n_kv_heads 0");
  expect_config_error("dim = 16\nrms_eps = -1.0\n" + base, "rms_eps");
  expect_config_error("dim = [\n", "invalid TOML");
  expect_config_error("dim = 16\nhidden_dim = 32\nn_layers = 1\nn_heads = 2\nvocab_size = 100\n"
                      "context_length = 64\ntokenizer = \"bytes\"\n",
                      "needs vocab_size >= 258");
}

TEST(Embedded, DefaultModel) {
  auto m = load_model("");
  ASSERT_TRUE(m) << m.error().message;
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.name, "conveyor-tiny");
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 4);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.context_length, 512);
  EXPECT_EQ(c.vocab_size, 258);
  EXPECT_TRUE(weights_match(c, m->weights));
  ASSERT_NE(m->tokenizer, nullptr);
  EXPECT_EQ(m->tokenizer->vocab_size(), 258);
  EXPECT_EQ(m->tokenizer->bos_id(), 256);
  EXPECT_EQ(m->tokenizer->eos_id(), 257);
  EXPECT_EQ(m->eos_ids, std::vector<int32_t>{257});
  EXPECT_EQ(m->tokenizer->encode("hi", true), (std::vector<int32_t>{256, 'h', 'i'}));
  // Fixed seed: every load gives the same weights, whatever LoadOptions::seed says.
  LoadOptions options;
  options.seed = 99;
  auto again = load_model("", options);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->weights.token_embedding.values, m->weights.token_embedding.values);
  EXPECT_EQ(again->weights.layers[3].wo.values, m->weights.layers[3].wo.values);
}

}  // namespace
}  // namespace conveyor
