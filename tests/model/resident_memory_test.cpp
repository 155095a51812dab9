// Resident memory after loading a quantized GGUF file is about the file's
// size plus the KV cache: the matrices are repacked in their own encoding
// (never expanded to float32), the untied token embedding stays in the
// mapped file (only the rows of tokens used are read), and the pages of
// repacked tensors are dropped from the mapping. Its own executable, so that
// the process's resident set holds nothing but this.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "model/formats/loader.hpp"
#include "backends/cpu/transformer.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

// The process's resident set (VmRSS), in bytes.
int64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    std::getline(status, key);
  }
  return -1;
}

class ResidentMemory : public ::testing::TestWithParam<const char*> {};

TEST_P(ResidentMemory, IsAboutTheFileSizePlusTheKvCache) {
  const std::string path = test::shared_model_path(GetParam());
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not there";
  const double file_bytes = double(std::filesystem::file_size(path));
  const int64_t before = resident_bytes();
  auto model = load_model(path);
  ASSERT_TRUE(model) << model.error().message;
  const int64_t loaded = resident_bytes();
  const ModelConfig config = model->config;
  Transformer t(config, std::move(model->weights), 1);
  model->weights = ModelWeights{};
  KvCache kv(KvCacheShape::for_model(config, 16, 64));
  const double kv_bytes = double(kv.shape().block_bytes()) * kv.shape().n_blocks;
  // Touch the KV pool and run a step, as serving does.
  std::vector<int32_t> prompt(200);
  std::iota(prompt.begin(), prompt.end(), 1);
  std::vector<int32_t> table(13);
  std::iota(table.begin(), table.end(), 0);
  ForwardBatch batch;
  batch.add_sequence(prompt, 0, table, true);
  std::vector<float> logits;
  t.forward(batch, kv, logits);
  const double grown = double(resident_bytes() - before);
  const double float32_copy = 4.0 * double(config.parameter_count());
  std::cout << GetParam() << ": file " << file_bytes / 1e6 << " MB, KV " << kv_bytes / 1e6
            << " MB, resident growth " << grown / 1e6 << " MB (" << double(loaded - before) / 1e6
            << " MB of it by load_model: tokenizer, metadata; float32 weights would be "
            << float32_copy / 1e6 << " MB)\n";
  // What the weights, the KV pool and one step took after load_model (which
  // builds the tokenizer: 6.6 MB for these 32,000-token vocabularies) is at
  // most the file plus the KV pool plus the forward pass's scratch and rope
  // table (about 3 MB here); measured: 16.1 MB (Q4_K_M) and 16.7 MB (Q8_0).
  EXPECT_LT(double(resident_bytes() - loaded), file_bytes + kv_bytes + 4e6);
  EXPECT_LT(grown, 0.5 * float32_copy);
}

INSTANTIATE_TEST_SUITE_P(Files, ResidentMemory,
                         ::testing::Values("tiny-llama2-q4_k_m.gguf", "tiny-llama2-q8_0.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           n = n.substr(0, n.find('.'));
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace conveyor
