#include "model/formats/loader.hpp"

#include <gtest/gtest.h>

#include "model/formats/gguf_writer.hpp"
#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

TEST(Loader, MissingFilesAreIoErrors) {
  auto m = load_model("/no/such/model.gguf");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, Errc::io_error);
  EXPECT_NE(m.error().message.find("/no/such/model.gguf: cannot open"), std::string::npos)
      << m.error().message;
  test::TempDir dir;
  auto d = load_model(dir.file(""));
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, Errc::io_error);
  EXPECT_NE(d.error().message.find("not a regular file"), std::string::npos);
}

TEST(Loader, DetectsGgufByContentAndName) {
  test::TempDir dir;
  auto bytes = serialize_gguf(test::small_model(true));
  ASSERT_TRUE(bytes);
  const std::string odd_name = dir.file("model.bin");  // GGUF content, llama2.c-like name
  test::write_bytes(odd_name, *bytes);
  auto m = load_model(odd_name);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->config.name, "small");
  EXPECT_EQ(m->source, odd_name);

  const std::string not_gguf = dir.file("model.gguf");  // GGUF name, other content
  test::write_bytes(not_gguf, std::vector<uint8_t>(100, 7));
  auto bad = load_model(not_gguf);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("not a GGUF file"), std::string::npos);

  const std::string other = dir.file("weights.dat");  // neither: read as llama2.c
  test::write_bytes(other, std::vector<uint8_t>(100, 7));
  auto l2c = load_model(other);
  ASSERT_FALSE(l2c);
  EXPECT_NE(l2c.error().message.find("llama2.c header"), std::string::npos)
      << l2c.error().message;
}

TEST(Loader, TokenizerFileIsNotForGguf) {
  test::TempDir dir;
  auto bytes = serialize_gguf(test::small_model(true));
  ASSERT_TRUE(bytes);
  test::write_bytes(dir.file("m.gguf"), *bytes);
  LoadOptions options;
  options.tokenizer_path = "tok.bin";
  auto m = load_model(dir.file("m.gguf"), options);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, Errc::invalid_argument);
}

TEST(Loader, DummyWithTokenizerFile) {
  CONVEYOR_REQUIRE_MODEL(tok, "llama2-tokenizer.bin");
  test::TempDir dir;
  const std::string cfg =
      "dim = 8\nhidden_dim = 16\nn_layers = 1\nn_heads = 2\nvocab_size = 32000\n"
      "context_length = 32\n";
  test::write_bytes(dir.file("v32k.toml"), std::vector<uint8_t>(cfg.begin(), cfg.end()));
  LoadOptions options;
  options.config_dirs = {dir.file("")};
  options.tokenizer_path = tok;
  auto m = load_model("dummy:v32k", options);
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_NE(m->tokenizer, nullptr);
  EXPECT_EQ(m->tokenizer->vocab_size(), 32000);
  EXPECT_EQ(m->eos_ids, std::vector<int32_t>{2});
  // A tokenizer file larger than the model's vocabulary is an error, not a crash.
  const std::string small =
      "dim = 8\nhidden_dim = 16\nn_layers = 1\nn_heads = 2\nvocab_size = 40000\n"
      "context_length = 32\n";
  test::write_bytes(dir.file("v40k.toml"), std::vector<uint8_t>(small.begin(), small.end()));
  auto mismatch = load_model("dummy:v40k", options);
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.error().message.find(tok), std::string::npos) << mismatch.error().message;
}

}  // namespace
}  // namespace conveyor
