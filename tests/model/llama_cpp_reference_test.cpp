// conveyor's forward pass on files quantized by llama.cpp itself, against
// llama.cpp's own logits for every position of several prompts
// (../shared/models/reference/*.jsonl; its README gives the format and how
// close to expect). Teacher forcing: each prompt runs token by token through
// the paged KV cache and every position's log-probabilities are compared.
#include <gtest/gtest.h>

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "model/formats/loader.hpp"
#include "backends/cpu/transformer.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "tests/kernels/cpu/isa_param.hpp"

namespace conveyor {
namespace {

std::string shared_models() { return CONVEYOR_SHARED_MODELS; }

struct Position {
  std::vector<std::pair<int32_t, double>> topk;  // llama.cpp's largest logits, largest first
  double lse = 0;                                // log-sum-exp of its logits
};
struct Prompt {
  std::vector<int32_t> tokens;
  std::vector<Position> positions;
};

std::vector<Prompt> read_reference(const std::string& path) {
  std::vector<Prompt> out;
  std::ifstream in(path);
  std::string line;
  simdjson::dom::parser parser;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    simdjson::dom::element doc = parser.parse(line);
    Prompt p;
    for (int64_t t : doc["prompt"].get_array()) p.tokens.push_back(int32_t(t));
    for (simdjson::dom::element pos : doc["topk"].get_array()) {
      Position q;
      for (simdjson::dom::element pair : pos.get_array()) {
        simdjson::dom::array a = pair.get_array();
        q.topk.emplace_back(int32_t(int64_t(a.at(0))), double(a.at(1)));
      }
      p.positions.push_back(std::move(q));
    }
    size_t i = 0;
    for (double l : doc["lse"].get_array()) p.positions[i++].lse = l;
    out.push_back(std::move(p));
  }
  return out;
}

// Logits after every position of `prompt`, token by token, or with
// `one_call` as a single prefill span that asks for every position's logits
// (the products then run on a batch of rows: AMX tiles from 8 on).
std::vector<std::vector<float>> logits_per_position(Transformer& t, const std::vector<int32_t>& prompt,
                                                    bool one_call) {
  const int32_t bs = 16, n_blocks = int32_t(prompt.size() + bs - 1) / bs;
  KvCache kv(KvCacheShape::for_model(t.config(), bs, n_blocks));
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::vector<std::vector<float>> out;
  std::vector<float> logits;
  ForwardBatch batch;
  if (one_call) {
    batch.add_sequence(prompt, 0, table, int32_t(prompt.size()));
    t.forward(batch, kv, logits);
    const size_t vocab = logits.size() / prompt.size();
    for (size_t pos = 0; pos < prompt.size(); ++pos)
      out.emplace_back(logits.begin() + pos * vocab, logits.begin() + (pos + 1) * vocab);
    return out;
  }
  for (size_t pos = 0; pos < prompt.size(); ++pos) {
    batch.clear();
    batch.add_sequence(std::span(prompt).subspan(pos, 1), int32_t(pos),
                       std::span(table).first(pos / bs + 1), true);
    t.forward(batch, kv, logits);
    out.push_back(logits);
  }
  return out;
}

double log_sum_exp(const std::vector<float>& v) {
  const double m = *std::max_element(v.begin(), v.end());
  double s = 0;
  for (float x : v) s += std::exp(double(x) - m);
  return m + std::log(s);
}

struct Agreement {
  double max_logprob_error = 0;  // over llama.cpp's top 10 at every position
  int positions = 0, argmax_checked = 0, argmax_agreed = 0;
};

Agreement compare(const std::string& model_file, const std::string& reference_file,
                  double tolerance, bool dequantize, bool one_call = false) {
  LoadOptions options;
  options.dequantize = dequantize;
  auto model = load_model(shared_models() + "/" + model_file, options);
  EXPECT_TRUE(model) << model.error().message;
  Agreement a;
  if (!model) return a;
  Transformer t(model->config, std::move(model->weights), 2);
  for (const Prompt& p : read_reference(shared_models() + "/reference/" + reference_file)) {
    const auto ours = logits_per_position(t, p.tokens, one_call);
    for (size_t i = 0; i < p.positions.size(); ++i) {
      const Position& ref = p.positions[i];
      const double lse = log_sum_exp(ours[i]);
      for (size_t j = 0; j < 10 && j < ref.topk.size(); ++j) {
        const auto [id, value] = ref.topk[j];
        a.max_logprob_error = std::max(
            a.max_logprob_error, std::abs((ours[i][size_t(id)] - lse) - (value - ref.lse)));
      }
      ++a.positions;
      if (ref.topk[0].second - ref.topk[1].second > tolerance) {
        ++a.argmax_checked;
        const auto best = std::max_element(ours[i].begin(), ours[i].end()) - ours[i].begin();
        a.argmax_agreed += best == ref.topk[0].first;
      }
    }
  }
  return a;
}

struct Case {
  const char* file;
  double tolerance;  // on each top-10 log-probability
  bool dequantize = false;  // decode the weights to float32 and multiply float activations
};

class LlamaCppReference : public ::testing::TestWithParam<Case> {};

TEST_P(LlamaCppReference, LogitsAgreePositionByPosition) {
  const Case c = GetParam();
  const std::string model = std::string(c.file) + ".gguf";
  if (!std::filesystem::exists(shared_models() + "/" + model))
    GTEST_SKIP() << shared_models() << "/" << model << " is not there";
  const Agreement a = compare(model, std::string(c.file) + ".jsonl", c.tolerance, c.dequantize);
  std::cout << c.file << (c.dequantize ? " (dequantized)" : "") << ": " << a.positions << " positions, max |logprob error| over top 10 = "
            << a.max_logprob_error << ", argmax " << a.argmax_agreed << "/" << a.argmax_checked
            << " where llama.cpp's top two differ by more than " << c.tolerance << "\n";
  EXPECT_GT(a.positions, 90);
  EXPECT_LE(a.max_logprob_error, c.tolerance);
  EXPECT_EQ(a.argmax_agreed, a.argmax_checked);
}

// Tolerances, from measurement (all 140 positions of the 8 prompts, top 10
// each; the numbers are in kernels/cpu/README.md): both implementations
// quantize activations to int8 per block, conveyor per 32 values for every
// type, llama.cpp per 32 for Q8_0 and Q4_0 but per 256 for the K-quants
// (Q8_K), and llama.cpp keeps its KV cache in f16. The largest difference is
// 0.16 on Q8_0 and Q4_0 (decoding the weights to float and multiplying float
// activations gives 0.24 on Q8_0), 0.42 and 0.48 on Q4_K_M and Q5_K_M, where
// llama.cpp's coarser activation scales dominate: quantizing activations per
// 256 as llama.cpp does brings those to 0.29 and 0.23.
// The Llama 3.1 (rope_freqs, tied Q6_K embedding, 128k BPE vocabulary) and
// Qwen 2 (Q/K/V biases, half-split RoPE) files land at 0.38 and 0.44, within
// the Llama 2 file's error; with the weights decoded to float32 and float
// activations (the `_dequantized` cases) they are 0.28 and 0.33 against 0.40
// for Llama 2, so the architectures add no error of their own.
INSTANTIATE_TEST_SUITE_P(Files, LlamaCppReference,
                         ::testing::Values(Case{"tiny-llama2-q8_0", 0.2},
                                           Case{"tiny-llama2-q4_0", 0.2},
                                           Case{"tiny-llama2-q4_k_m", 0.5},
                                           Case{"tiny-llama2-q5_k_m", 0.55},
                                           Case{"tiny-llama3-q4_k_m", 0.5},
                                           Case{"tiny-qwen2-q4_k_m", 0.5},
                                           Case{"tiny-llama2-q4_k_m", 0.5, true},
                                           Case{"tiny-llama3-q4_k_m", 0.5, true},
                                           Case{"tiny-qwen2-q4_k_m", 0.5, true}),
                         [](const auto& info) {
                           std::string name = info.param.file;
                           if (info.param.dequantize) name += "_dequantized";
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The same files prefilled in one call per prompt (7 to 26 tokens, so the
// products run on batches of rows), on each instruction-set path of the
// products: AVX2, AVX-VNNI, AVX-512 VNNI, and AMX tiles (emulated where the CPU has
// none). Q4_K_M files hold Q4_K and Q6_K matrices, Q5_K_M ones Q5_K and Q6_K.
class LlamaCppReferencePrefill : public ::testing::TestWithParam<kernels::Isa> {
 protected:
  void SetUp() override {
    if (!kernels::testing::isa_testable(GetParam()))
      GTEST_SKIP() << "this CPU does not run " << kernels::isa_name(GetParam());
    kernels::force_isa(GetParam());
  }
  void TearDown() override { kernels::force_isa(kernels::detected_isa()); }
};

TEST_P(LlamaCppReferencePrefill, LogitsAgreeWhenThePromptIsOneCall) {
  for (const Case c : {Case{"tiny-llama2-q8_0", 0.2}, Case{"tiny-llama2-q4_0", 0.2},
                       Case{"tiny-llama2-q4_k_m", 0.5}, Case{"tiny-llama2-q5_k_m", 0.55}}) {
    const std::string model = std::string(c.file) + ".gguf";
    if (!std::filesystem::exists(shared_models() + "/" + model))
      GTEST_SKIP() << shared_models() << "/" << model << " is not there";
    const Agreement a = compare(model, std::string(c.file) + ".jsonl", c.tolerance, false, true);
    std::cout << c.file << " prefilled, " << kernels::isa_name(GetParam())
              << (kernels::amx_emulated() ? " (emulated tiles)" : "") << ": " << a.positions
              << " positions, max |logprob error| over top 10 = " << a.max_logprob_error
              << ", argmax " << a.argmax_agreed << "/" << a.argmax_checked << "\n";
    EXPECT_GT(a.positions, 90) << c.file;
    EXPECT_LE(a.max_logprob_error, c.tolerance) << c.file;
    EXPECT_EQ(a.argmax_agreed, a.argmax_checked) << c.file;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, LlamaCppReferencePrefill,
                         ::testing::Values(kernels::Isa::avx2, kernels::Isa::avxvnni, kernels::Isa::avx512,
                                           kernels::Isa::amx),
                         [](const auto& info) { return kernels::testing::isa_test_name(info.param); });

}  // namespace
}  // namespace conveyor
