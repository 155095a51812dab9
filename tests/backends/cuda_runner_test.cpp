// The CUDA backend on a device (label gpu): the CUDA runner against the CPU
// runner on the real test models, sampling on the device against the host's,
// a sequence swapped out and back in through CudaSwapEngine, and the KV
// pool sized from gpu_memory_utilization. Without a device every test skips
// and says why (cudaGetDeviceCount's reason).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <caf/all.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cpu/cpu_embedder.hpp"
#include "actors/engine.hpp"
#include "grammar/json_schema.hpp"
#include "kernels/cpu/kv_dtype.hpp"
#include "tests/actors/engine_test_util.hpp"
#include "tests/cuda_device.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

constexpr int32_t kBlock = 16;

std::string shared(const std::string& name) { return test::shared_model_path(name); }

Backend make(const std::string& device, const std::string& model, int64_t kv_tokens, int64_t swap_tokens = 0,
             KvDtype kv_dtype = KvDtype::bf16) {
  auto m = load_model(model);
  EXPECT_TRUE(m.has_value()) << model << ": " << m.error().message;
  if (!m) return {};
  EngineConfig c;
  c.device = *parse_device(device);
  c.kv_cache_tokens = kv_tokens;
  c.swap_space_tokens = swap_tokens;
  c.kv_cache_dtype = kv_dtype;
  c.threads = 2;
  auto b = backend_factory(*parse_device(device))(c, std::move(m).value());
  EXPECT_TRUE(b.has_value()) << device << " " << model << ": " << (b ? "" : b.error().message);
  return b ? std::move(b).value() : Backend{};
}

// One step's plan: sequence i's span of `tokens[i]` at `pos[i]`, its blocks
// [i · per_seq, ...), logits for each.
struct Plans {
  int32_t per_seq;
  uint64_t iteration = 0;
  StepPlan step(const std::vector<seq_id>& ids, const std::vector<std::vector<int32_t>>& tokens,
                const std::vector<int32_t>& pos, const SamplingParams* start) {
    StepPlan p;
    p.iteration = iteration++;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::vector<int32_t> table;
      const int32_t end = pos[i] + int32_t(tokens[i].size());
      for (int32_t k = 0; k < (end + kBlock - 1) / kBlock; ++k) table.push_back(int32_t(i) * per_seq + k);
      p.batch.add_sequence(tokens[i], pos[i], table, true);
      p.seq_ids.push_back(ids[i]);
      if (start) {
        p.new_samplers.emplace_back(ids[i], *start);
        p.new_sampler_prompts.push_back(tokens[i]);
      }
    }
    return p;
  }
};

// The model's matrices decoded to float32 for the CPU runner, each value
// first rounded to bf16 as the CUDA runner uploads it (model/bf16_pack.hpp)
// when `bf16`: the CPU then computes in float32 on the device's weights.
LoadedModel with_f32_matrices(LoadedModel m, bool bf16) {
  const ModelConfig& c = m.config;
  auto decode = [bf16](WeightMatrix& w, int64_t in) {
    if (w.empty()) return;
    const int64_t rows = int64_t(w.elements(in)) / in;
    WeightMatrix out;
    out.type = WeightType::f32;
    out.values.resize(size_t(rows * in));
    for (int64_t r = 0; r < rows; ++r) w.decode_row(r, in, out.values.data() + r * in);
    if (bf16)
      for (float& v : out.values) v = kernels::kv_half::bf16_to_f32(kernels::kv_half::f32_to_bf16(v));
    w = std::move(out);
  };
  decode(m.weights.token_embedding, c.dim);
  decode(m.weights.classifier, c.dim);
  for (LayerWeights& l : m.weights.layers) {
    for (WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.w1, &l.w3}) decode(*w, c.dim);
    decode(l.wo, c.q_dim());
    decode(l.w2, c.hidden_dim);
  }
  return m;
}

Backend make_from(const std::string& device, LoadedModel m, int64_t kv_tokens, KvDtype kv_dtype = KvDtype::bf16) {
  EngineConfig c;
  c.device = *parse_device(device);
  c.kv_cache_tokens = kv_tokens;
  c.kv_cache_dtype = kv_dtype;
  c.threads = 2;
  auto b = backend_factory(c.device)(c, std::move(m));
  EXPECT_TRUE(b.has_value()) << device << ": " << (b ? "" : b.error().message);
  return b ? std::move(b).value() : Backend{};
}

// |a - b| over the tokens both top-5 lists hold.
double logprob_difference(const SampleResult& a, const SampleResult& b) {
  double worst = 0;
  for (const TokenLogprob& t : a.top)
    for (const TokenLogprob& u : b.top)
      if (t.token == u.token) worst = std::max(worst, double(std::fabs(t.logprob - u.logprob)));
  return worst;
}

// Teacher-forced, each step's raw top-5 logprobs from three runners: the
// CPU on the bf16 weights the device holds, in float32 (the reference, whose
// greedy tokens all three are fed); the CPU on the unrounded float32 weights;
// the CUDA runner. The tolerance comes from the arithmetic:
//
// - The device and the reference share the weights (bf16 values) and the KV
//   cache's rounding (bf16 here, bit for bit: kernels/cuda's write_kv). The
//   device also rounds each product's input activations to bf16 (to_bf16
//   before each cuBLAS product) and sums in another order.
// - A product y = sum_{i<k} w_i x_i with inputs rounded to bf16 (unit
//   roundoff u = 2^-8) moves by sum w_i x_i d_i, |d_i| <= u. Summation order
//   in float32 moves it by at most k 2^-24 sum |w_i x_i| (about sqrt(k) 2^-24
//   for rounding errors of random sign): for these models' k <= 1024, at
//   most 2^-14 against the input rounding's 2^-8 (typically 2^-19), so it is
//   left inside the margin below.
// - Rounding the weights w_i instead of the inputs x_i perturbs the same
//   terms by the same relative amount: so the float32 CPU against the
//   reference shows, on this model and these tokens, how far a 2^-8 relative
//   rounding at every product moves the logprobs: d_w (its largest value).
//   The device's input rounding is another draw of that size; twice d_w,
//   tau = 2 d_w, bounds its logprobs' distance from the reference, and a
//   floor of u (logprob units) covers weights bf16 holds exactly.
// - Greedy ids: a logit moving by tau can swap the top two only where the
//   reference's top-2 gap is below 2 tau. Those positions are near ties: the
//   test names each, and requires the same id everywhere else.
void compare_with_cpu(const std::string& model, KvDtype kv_dtype = KvDtype::bf16) {
  if (model.find('/') != std::string::npos && !std::filesystem::exists(model)) GTEST_SKIP() << model << " not found";
  auto loaded = [&](bool bf16) -> LoadedModel {
    auto m = load_model(model);
    EXPECT_TRUE(m.has_value()) << model << ": " << (m ? "" : m.error().message);
    return m ? with_f32_matrices(std::move(m).value(), bf16) : LoadedModel{};
  };
  const int64_t kv_tokens = 4 * 8 * kBlock;
  Backend reference = make_from("cpu", loaded(true), kv_tokens, kv_dtype),
          f32 = make_from("cpu", loaded(false), kv_tokens, kv_dtype);
  Backend gpu = make("cuda", model, kv_tokens, 0, kv_dtype);
  ASSERT_TRUE(reference.runner && f32.runner && gpu.runner);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 5;
  p.max_tokens = 1000;
  Plans rp{8}, fp{8}, gp{8};
  const std::vector<seq_id> ids = {1, 2, 3, 4};
  std::vector<std::vector<int32_t>> tokens = {{1, 5, 9, 30, 31, 40}, {1, 7}, {1, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116}, {1, 3, 3, 3}};
  std::vector<int32_t> pos = {0, 0, 0, 0};
  struct Position {
    int step;
    size_t seq;
    double gap;  // the reference's top-2 logprob gap
    bool same;   // the device's greedy id is the reference's
  };
  std::vector<Position> positions;
  double d_w = 0, d_device = 0;
  for (int step = 0; step < 40; ++step) {
    StepPlan a = rp.step(ids, tokens, pos, step == 0 ? &p : nullptr);
    StepPlan b = fp.step(ids, tokens, pos, step == 0 ? &p : nullptr);
    StepPlan g = gp.step(ids, tokens, pos, step == 0 ? &p : nullptr);
    const StepResult rr = reference.runner->run(a), rf = f32.runner->run(b), rg = gpu.runner->run(g);
    ASSERT_EQ(rr.tokens.size(), ids.size());
    ASSERT_EQ(rf.tokens.size(), ids.size());
    ASSERT_EQ(rg.tokens.size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      const SampleResult &r = rr.tokens[i].result, &f = rf.tokens[i].result, &d = rg.tokens[i].result;
      ASSERT_EQ(r.top.size(), 5u);
      ASSERT_EQ(d.top.size(), 5u);
      d_w = std::max(d_w, logprob_difference(r, f));
      d_device = std::max(d_device, logprob_difference(r, d));
      positions.push_back({step, i, double(r.top[0].logprob - r.top[1].logprob), d.token == r.token});
      pos[i] += int32_t(tokens[i].size());
      tokens[i] = {r.token};
    }
  }
  const double tau = std::max(2 * d_w, 1.0 / 256);
  int near_ties = 0, same = 0;
  for (const Position& at : positions) {
    same += at.same;
    if (at.gap < 2 * tau) {  // a near tie: either id may come out
      ++near_ties;
      if (!at.same)
        std::printf("%s: near tie at step %d, sequence %zu (top-2 gap %.5f < 2 tau): the device took the other\n",
                    model.c_str(), at.step, at.seq, at.gap);
      continue;
    }
    EXPECT_TRUE(at.same) << model << " step " << at.step << " sequence " << at.seq << ": the device's greedy id "
                         << "differs where the reference's top-2 gap " << at.gap << " is over 2 tau = " << 2 * tau;
  }
  EXPECT_LE(d_device, tau) << model << ": the device's logprobs move by more than 2 d_w (d_w " << d_w << ")";
  std::printf("%s: d_w %.5f, tau %.5f, device %.5f; greedy ids the same at %d of %zu positions, %d near ties\n",
              model.c_str(), d_w, tau, d_device, same, positions.size(), near_ties);
}

TEST(CudaRunner, MatchesTheCpuRunnerOnStories260K) {
  SKIP_WITHOUT_DEVICE();
  compare_with_cpu(shared("stories260K.bin"));
}

// An 8-bit KV cache (q8_0) on both: the writes are bit for bit the CPU's
// (tests/kernels/cuda), so the device moves the logprobs only as far as
// rounding its products' inputs moves what is quantized; the float32 CPU
// runner's distance, d_w, is measured on the same q8_0 cache.
TEST(CudaRunner, MatchesTheCpuRunnerWithAnInt8KvCache) {
  SKIP_WITHOUT_DEVICE();
  for (const char* f : {"tiny-llama2-q4_k_m.gguf", "tiny-qwen2-q4_k_m.gguf"}) compare_with_cpu(shared(f), KvDtype::q8_0);
}

TEST(CudaRunner, MatchesTheCpuRunnerOnTheTinyGgufFiles) {
  SKIP_WITHOUT_DEVICE();
  for (const char* f : {"tiny-random-llama-f32.gguf", "tiny-llama2-q4_k_m.gguf", "tiny-llama3-q4_k_m.gguf",
                        "tiny-qwen2-q4_k_m.gguf"})
    compare_with_cpu(shared(f));
}

// Prompt logprobs on the device against the CPU runner on the device's bf16
// weights, within compare_with_cpu's tolerance (tau: twice what unrounded
// float32 weights move them, at least 1/256). Sequence 1's prompt is scored
// in two steps: a chunk that samples nothing, then the rest, more rows than
// one pass (kScoredRowsPerPass), beside sequence 2 that only decodes. On
// the device the second step is launched before the first is finished: the
// scoring step must complete before anything else is queued.
TEST(CudaRunner, ScoresPromptPositionsAsTheCpuRunnerDoes) {
  SKIP_WITHOUT_DEVICE();
  const std::string model = shared("tiny-llama2-q4_k_m.gguf");
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " not found";
  auto loaded = [&](bool bf16) {
    auto m = load_model(model);
    EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message);
    return with_f32_matrices(std::move(m).value(), bf16);
  };
  const int64_t kv_tokens = 2 * 8 * kBlock;
  Backend reference = make_from("cpu", loaded(true), kv_tokens), f32 = make_from("cpu", loaded(false), kv_tokens);
  Backend gpu = make("cuda", model, kv_tokens);
  ASSERT_TRUE(reference.runner && f32.runner && gpu.runner);
  ASSERT_TRUE(gpu.runner->scores_prompts());

  std::vector<int32_t> prompt = {1};
  for (int32_t i = 1; i < 100; ++i) prompt.push_back(10 + (37 * i) % 700);
  constexpr int32_t kChunk = 30, kTop = 3;
  std::vector<int32_t> table1(8), table2 = {8};
  for (int32_t k = 0; k < 8; ++k) table1[size_t(k)] = k;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 100;
  auto scoring = [&](int32_t slot, int32_t from, int32_t to) {  // positions [from, to) predict prompt[from + 1 ..]
    PromptScoring p;
    p.slot = slot;
    p.row_offset = 0;
    p.first = from + 1;
    p.top = kTop;
    p.targets.assign(prompt.begin() + from + 1, prompt.begin() + to + 1);
    return p;
  };
  auto plans = [&] {
    std::vector<StepPlan> steps(2);
    const std::vector<int32_t> chunk(prompt.begin(), prompt.begin() + kChunk), rest(prompt.begin() + kChunk, prompt.end());
    const std::vector<int32_t> other = {1, 5, 9}, next = {42};
    steps[0].iteration = 0;
    steps[0].batch.add_sequence(chunk, 0, std::span(table1).first(2), 0);
    steps[0].batch.add_sequence(other, 0, table2, 1);
    steps[0].seq_ids = {1, 2};
    steps[0].new_samplers = {{1, greedy}, {2, greedy}};
    steps[0].new_sampler_prompts = {prompt, other};
    steps[0].score.push_back(scoring(0, 0, kChunk));
    steps[1].iteration = 1;
    steps[1].batch.add_sequence(rest, kChunk, table1, 1);
    steps[1].batch.add_sequence(next, 3, table2, 1);
    steps[1].seq_ids = {1, 2};
    steps[1].score.push_back(scoring(0, kChunk, int32_t(prompt.size()) - 1));
    return steps;
  };
  auto run_in_turn = [&](StepRunner& runner) {
    std::vector<StepPlan> steps = plans();
    return std::vector<StepResult>{runner.run(steps[0]), runner.run(steps[1])};
  };
  const std::vector<StepResult> ref = run_in_turn(*reference.runner), fl = run_in_turn(*f32.runner);
  std::vector<StepPlan> steps = plans();
  gpu.runner->launch(steps[0]);
  gpu.runner->launch(steps[1]);
  std::vector<StepResult> dev;
  dev.push_back(gpu.runner->finish());
  dev.push_back(gpu.runner->finish());

  double d_w = 0, d_device = 0;
  int near_ties = 0;
  for (size_t step = 0; step < 2; ++step) {
    ASSERT_EQ(ref[step].prompt_scores.size(), 1u);
    ASSERT_EQ(dev[step].prompt_scores.size(), 1u) << "step " << step;
    const PromptScores &r = ref[step].prompt_scores[0], &f = fl[step].prompt_scores[0], &d = dev[step].prompt_scores[0];
    EXPECT_EQ(d.seq, 1u);
    EXPECT_EQ(d.first, r.first);
    ASSERT_EQ(d.entries.size(), r.entries.size()) << "step " << step;
    ASSERT_EQ(d.entries.size(), step == 0 ? size_t(kChunk) : prompt.size() - 1 - kChunk);
    for (size_t i = 0; i < r.entries.size(); ++i) {
      EXPECT_EQ(d.entries[i].token, r.entries[i].token);
      ASSERT_EQ(d.entries[i].top.size(), size_t(kTop));
      d_w = std::max(d_w, double(std::fabs(f.entries[i].logprob - r.entries[i].logprob)));
      d_device = std::max(d_device, double(std::fabs(d.entries[i].logprob - r.entries[i].logprob)));
    }
    EXPECT_EQ(dev[step].tokens.size(), ref[step].tokens.size()) << "step " << step;
  }
  const double tau = std::max(2 * d_w, 1.0 / 256);
  for (size_t step = 0; step < 2; ++step) {
    const PromptScores &r = ref[step].prompt_scores[0], &d = dev[step].prompt_scores[0];
    for (size_t i = 0; i < r.entries.size(); ++i) {
      const auto& rt = r.entries[i].top;
      if (rt[0].logprob - rt[1].logprob < 2 * tau) {
        ++near_ties;
        continue;
      }
      EXPECT_EQ(d.entries[i].top[0].token, rt[0].token) << "step " << step << " position " << i;
      EXPECT_LE(std::fabs(d.entries[i].top[0].logprob - rt[0].logprob), tau) << "step " << step << " position " << i;
    }
  }
  EXPECT_LE(d_device, tau) << "the device's prompt logprobs move by more than 2 d_w (d_w " << d_w << ")";
  std::printf("prompt scoring: d_w %.5f, tau %.5f, device %.5f over %zu positions, %d near ties\n", d_w, tau,
              d_device, prompt.size() - 1, near_ties);
}

// Embeddings on the device (backends/cuda/cuda_embedder.hpp) against the CPU
// embedder on the device's bf16 weights (the reference; the CPU embedder is
// checked against llama.cpp's own in backends/cpu/embedding_test.cpp), within
// compare_with_cpu's tolerance, both poolings: inputs of many lengths in
// several batches, then a batch of more inputs than the embedder reserved
// blocks for (its KV cache grows).
TEST(CudaEmbedder, MatchesTheCpuEmbedderOnTheDevicesWeights) {
  SKIP_WITHOUT_DEVICE();
  const std::string model = shared("tiny-random-llama-f32.gguf");
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " not found";
  auto cpu_embedder = [&](bool bf16) {
    auto m = load_model(model);
    EXPECT_TRUE(m.has_value());
    LoadedModel l = with_f32_matrices(std::move(m).value(), bf16);
    return std::make_shared<CpuEmbedder>(std::make_shared<Transformer>(l.config, std::move(l.weights), 2),
                                         KvDtype::bf16);
  };
  const auto reference = cpu_embedder(true), f32 = cpu_embedder(false);
  Backend gpu = make("cuda", model, 8 * kBlock);
  ASSERT_TRUE(gpu.embedder) << "the CUDA backend has no embedder";
  EXPECT_EQ(gpu.embedder->dim(), reference->dim());
  std::vector<std::vector<int32_t>> many, short_ones(100);
  for (int32_t i = 0; i < 24; ++i) {
    many.emplace_back();
    for (int32_t t = 0; t < 1 + (i * 37) % 120; ++t) many.back().push_back(t == 0 ? 1 : 3 + (i * 11 + t * 7) % 900);
  }
  for (int32_t i = 0; i < 100; ++i) short_ones[size_t(i)] = {1, 3 + i, 200 + 2 * i};
  double d_w = 0, d_device = 0;
  for (const auto& inputs : {many, short_ones}) {
    for (Pooling pooling : {Pooling::last, Pooling::mean}) {
      auto r = reference->embed(inputs, pooling), f = f32->embed(inputs, pooling), d = gpu.embedder->embed(inputs, pooling);
      ASSERT_TRUE(r && f);
      ASSERT_TRUE(d) << d.error().message;
      ASSERT_EQ(d->size(), inputs.size());
      for (size_t i = 0; i < inputs.size(); ++i) {
        ASSERT_EQ((*d)[i].size(), (*r)[i].size());
        for (size_t k = 0; k < (*r)[i].size(); ++k) {
          d_w = std::max(d_w, double(std::fabs((*f)[i][k] - (*r)[i][k])));
          d_device = std::max(d_device, double(std::fabs((*d)[i][k] - (*r)[i][k])));
        }
      }
    }
  }
  const double tau = std::max(2 * d_w, 1.0 / 256);
  EXPECT_LE(d_device, tau) << "d_w " << d_w;
  std::printf("embeddings: d_w %.5f, tau %.5f, device %.5f\n", d_w, tau, d_device);
  // Bad inputs are refused by index, as on the CPU.
  auto bad = gpu.embedder->embed({{1, 2}, {}}, Pooling::last);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("input 1"), std::string::npos) << bad.error().message;
}

// Runs sequence `id` alone on `table`'s blocks: `tokens` at `pos` first (its
// prompt when `start`), then its own samples, `steps` steps in all.
std::vector<SampleResult> decode(StepRunner& runner, seq_id id, const std::vector<int32_t>& table,
                                 std::vector<int32_t> tokens, int32_t pos, int steps,
                                 const SamplingParams* start) {
  std::vector<SampleResult> out;
  for (int s = 0; s < steps; ++s) {
    StepPlan p;
    const int32_t end = pos + int32_t(tokens.size());
    p.batch.add_sequence(tokens, pos, std::span(table).first(size_t((end + kBlock - 1) / kBlock)), true);
    p.seq_ids.push_back(id);
    if (start && s == 0) {
      p.new_samplers.emplace_back(id, *start);
      p.new_sampler_prompts.push_back(tokens);
    }
    StepResult r = runner.run(p);
    EXPECT_EQ(r.tokens.size(), 1u);
    if (r.tokens.empty()) return out;
    out.push_back(r.tokens[0].result);
    pos = end;
    tokens = {out.back().token};
  }
  return out;
}

std::vector<int32_t> ids_of(const std::vector<SampleResult>& v) {
  std::vector<int32_t> ids;
  for (const SampleResult& r : v) ids.push_back(r.token);
  return ids;
}

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 1000;
  return p;
}

// Sampling on the device (a step whose rows are all device_samplable) picks
// what the host picks from the same logits (a row with logprobs goes to the
// host): greedy, a seeded draw with temperature, min-p and penalties, and
// one with top-k and top-p as well.
// kernels/cuda/README.md says where a draw may differ (within about 1e-16
// of a boundary between two tokens).
TEST(CudaRunner, DeviceSamplingEqualsHostSampling) {
  SKIP_WITHOUT_DEVICE();
  Backend gpu = make("cuda", shared("stories260K.bin"), 6 * 8 * kBlock);
  ASSERT_TRUE(gpu.runner);
  SamplingParams seeded = greedy_params();
  seeded.temperature = 0.9f;
  seeded.min_p = 0.02f;
  seeded.frequency_penalty = 0.4f;
  seeded.presence_penalty = 0.1f;
  seeded.repetition_penalty = 1.15f;
  seeded.seed = 1234;
  seeded.has_seed = true;
  SamplingParams cut = seeded;
  cut.top_k = 40;
  cut.top_p = 0.9f;
  const std::vector<int32_t> prompt = {1, 9, 10, 11};
  seq_id id = 1;
  int32_t block = 0;
  for (const SamplingParams& device_params : {greedy_params(), seeded, cut}) {
    SamplingParams host_params = device_params;
    host_params.logprobs = 0;
    std::vector<int32_t> a, b;
    for (int32_t k = 0; k < 8; ++k) a.push_back(block++);
    for (int32_t k = 0; k < 8; ++k) b.push_back(block++);
    const auto on_device = decode(*gpu.runner, id++, a, prompt, 0, 64, &device_params);
    const auto on_host = decode(*gpu.runner, id++, b, prompt, 0, 64, &host_params);
    EXPECT_EQ(ids_of(on_device), ids_of(on_host))
        << "temperature " << device_params.temperature << " top_k " << device_params.top_k;
  }
}

// Steps launched before the previous one finishes (as the executor drives a
// pipelined runner: placeholders filled on the device) give the ids of steps
// run in turn: device-sampled rows (greedy, seeded with top-k and top-p), a
// row with penalties (which count the previous step's sample on the
// device), and a row with logprobs (sampled on the host: the next step
// waits for it); a sequence retires half-way and another starts, and one
// step has no logits rows at all.
// Speculative verification on the device: a span of the last token and
// four drafts (three right, the fourth wrong) emits the three and then the
// token plain decoding writes there, as on the CPU runner; decoding goes on
// from there as if it had run token by token. Greedy on stories260K (a
// trained model: its top two are far apart on this prompt), beside a
// sequence that decodes plainly.
TEST(CudaRunner, VerifiesDraftsAsTheCpuRunnerDoes) {
  SKIP_WITHOUT_DEVICE();
  const std::string model = shared("stories260K.bin");
  const SamplingParams greedy = greedy_params();
  const std::vector<int32_t> prompt = {1, 400, 37, 300, 41};
  std::vector<int32_t> table1(4), table2(4);
  for (int32_t k = 0; k < 4; ++k) table1[size_t(k)] = k, table2[size_t(k)] = 4 + k;
  for (const char* device : {"cpu", "cuda"}) {
    Backend b = std::string(device) == "cpu" ? make_from("cpu", with_f32_matrices(*load_model(model), true), 8 * kBlock)
                                              : make("cuda", model, 8 * kBlock);
    ASSERT_TRUE(b.runner);
    ASSERT_TRUE(b.runner->verifies_drafts());
    const std::vector<int32_t> plain = ids_of(decode(*b.runner, 1, table1, prompt, 0, 8, &greedy));
    ASSERT_EQ(plain.size(), 8u);
    // Sequence 2: the prompt, then its first token and four drafts.
    StepPlan first;
    first.batch.add_sequence(prompt, 0, std::span(table2).first(1), 1);
    first.seq_ids = {2};
    first.new_samplers = {{2, greedy}};
    first.new_sampler_prompts = {prompt};
    const StepResult r0 = b.runner->run(first);
    ASSERT_EQ(r0.tokens.size(), 1u);
    ASSERT_EQ(r0.tokens[0].result.token, plain[0]) << device;
    const int32_t wrong = (plain[4] + 1) % 512;
    const std::vector<int32_t> span = {plain[0], plain[1], plain[2], plain[3], wrong};
    StepPlan verify;
    verify.iteration = 1;
    verify.batch.add_sequence(span, int32_t(prompt.size()), std::span(table2).first(1), int32_t(span.size()));
    verify.seq_ids = {2};
    const StepResult r1 = b.runner->run(verify);
    std::vector<int32_t> emitted;
    for (const SampledToken& t : r1.tokens) emitted.push_back(t.result.token);
    EXPECT_EQ(emitted, std::vector<int32_t>(plain.begin() + 1, plain.begin() + 5)) << device;
    // On from the last emitted token, at its position: the rejected draft's KV is overwritten.
    const int32_t pos = int32_t(prompt.size()) + 4;
    const std::vector<SampleResult> rest = decode(*b.runner, 2, table2, {plain[4]}, pos, 3, nullptr);
    EXPECT_EQ(ids_of(rest), std::vector<int32_t>(plain.begin() + 5, plain.end())) << device;
  }
}

TEST(CudaRunner, PipelinedStepsEqualStepsRunInTurn) {
  SKIP_WITHOUT_DEVICE();
  SamplingParams seeded = greedy_params();
  seeded.temperature = 0.8f;
  seeded.top_k = 40;
  seeded.top_p = 0.9f;
  seeded.seed = 99;
  seeded.has_seed = true;
  SamplingParams penalised = seeded;
  penalised.frequency_penalty = 0.3f;
  SamplingParams logprobs = greedy_params();
  logprobs.logprobs = 2;
  for (const std::vector<SamplingParams>& params : std::vector<std::vector<SamplingParams>>{
           {greedy_params(), seeded, seeded}, {greedy_params(), seeded, penalised}, {seeded, logprobs, seeded}}) {
    std::vector<std::vector<int32_t>> ids[2];
    for (int pipelined = 0; pipelined < 2; ++pipelined) {
      Backend gpu = make("cuda", shared("stories260K.bin"), 4 * 8 * kBlock);
      ASSERT_TRUE(gpu.runner);
      ASSERT_TRUE(gpu.runner->pipelined());
      // Sequences 1 to 3, then 4 in place of 3 from step 10, 8 blocks each;
      // step 5 is a prompt chunk of sequence 5 alone, without logits rows.
      std::map<seq_id, int32_t> next_pos;
      auto plan = [&](int step) {
        StepPlan p;
        p.iteration = uint64_t(step);
        auto add = [&](seq_id id, const std::vector<int32_t>& tokens, bool logits, int32_t first_block) {
          const int32_t pos = next_pos[id];
          std::vector<int32_t> table;
          for (int32_t k = 0; k <= (pos + int32_t(tokens.size()) - 1) / kBlock; ++k) table.push_back(first_block + k);
          p.batch.add_sequence(tokens, pos, table, logits);
          p.seq_ids.push_back(id);
          if (pos == 0) {
            p.new_samplers.emplace_back(id, params[size_t(std::min<seq_id>(id, 3) - 1)]);
            p.new_sampler_prompts.push_back(tokens);
          }
          next_pos[id] = pos + int32_t(tokens.size());
        };
        if (step == 5) {
          add(5, {1, 30, 31}, false, 24);
          return p;
        }
        for (seq_id id = 1; id <= 4; ++id) {
          if ((id == 3 && step >= 10) || (id == 4 && step < 10)) continue;
          const bool starts = step == (id == 4 ? 10 : 0);
          add(id, starts ? std::vector<int32_t>{1, 20, 21, int32_t(id)} : std::vector<int32_t>{-1}, true,
              int32_t(id == 4 ? 2 : id - 1) * 8);  // 4 reuses 3's blocks
        }
        if (step == 6) p.retired.push_back(5);
        if (step == 10) p.retired.push_back(3);
        return p;
      };
      std::vector<std::vector<int32_t>>& out = ids[pipelined];
      out.assign(5, {});
      auto take = [&](const StepResult& r) {
        for (const SampledToken& t : r.tokens) out[size_t(t.seq)].push_back(t.result.token);
      };
      for (int step = 0; step < 24; ++step) {
        StepPlan p = plan(step);
        if (!pipelined) {
          take(gpu.runner->run(p));
          continue;
        }
        gpu.runner->launch(p);
        if (step > 0) take(gpu.runner->finish());
      }
      if (pipelined) take(gpu.runner->finish());
    }
    EXPECT_EQ(ids[1], ids[0]) << "seeded " << params[1].temperature << " logprobs " << params[1].logprobs;
  }
}

// A sequence swapped out to pinned host memory, its device blocks written
// over by another sequence, and swapped back into other blocks, continues
// with the ids of an undisturbed run.
TEST(CudaSwap, SwappedOutAndBackInContinuesAsUndisturbed) {
  SKIP_WITHOUT_DEVICE();
  Backend gpu = make("cuda", shared("stories260K.bin"), 4 * 8 * kBlock, 8 * kBlock);
  ASSERT_TRUE(gpu.runner && gpu.swap);
  const SamplingParams greedy = greedy_params();
  const std::vector<int32_t> prompt = {1, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36};
  const auto undisturbed = ids_of(decode(*gpu.runner, 1, {0, 1, 2, 3}, prompt, 0, 24, &greedy));
  ASSERT_EQ(undisturbed.size(), 24u);
  // 18 prompt tokens and 11 samples (the 12th is not in the cache yet): positions
  // [0, 29) in blocks 4 and 5, out to host blocks 0 and 1.
  auto first = ids_of(decode(*gpu.runner, 2, {4, 5, 6, 7}, prompt, 0, 12, &greedy));
  ASSERT_EQ(first, std::vector<int32_t>(undisturbed.begin(), undisturbed.begin() + 12));
  copy_and_wait(*gpu.swap, SwapOrder{2, SwapDirection::out, {{4, 0}, {5, 1}}});
  std::vector<int32_t> other(30);
  for (int32_t i = 0; i < 30; ++i) other[size_t(i)] = 90 + i;
  decode(*gpu.runner, 3, {4, 5, 6, 7}, other, 0, 1, &greedy);  // writes over blocks 4 and 5
  copy_and_wait(*gpu.swap, SwapOrder{2, SwapDirection::in, {{0, 8}, {1, 9}}});
  const auto rest =
      ids_of(decode(*gpu.runner, 2, {8, 9, 10, 11}, {first.back()}, int32_t(prompt.size()) + 11, 12, nullptr));
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_EQ(first, undisturbed);
}

// The pool takes what --gpu-memory-utilization leaves after the weights and
// the workspace; too small a share is refused with a message that says so.
TEST(CudaBackend, PoolSizedFromGpuMemoryUtilization) {
  SKIP_WITHOUT_DEVICE();
  auto capacity = [](double utilization) -> Expected<int64_t> {
    auto m = load_model("dummy:llama-15m");
    if (!m) return m.error();
    EngineConfig c;
    c.device = DeviceSpec{DeviceKind::cuda, 0};
    c.gpu_memory_utilization = utilization;
    c.max_num_seqs = 100000;     // not the bound here
    c.max_batched_tokens = 256;  // the workspace: small (the emulator's warm-up product is slow)
    auto b = make_cuda_backend(c, std::move(m).value());
    if (!b) return b.error();
    return b->capacity.tokens;
  };
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  const double in_use = double(total - free) / double(total);
  if (in_use > 0.4) GTEST_SKIP() << "the device is " << int(in_use * 100) << "% in use already";
  auto low = capacity(in_use + 0.05), high = capacity(in_use + 0.1);
  ASSERT_TRUE(low.has_value()) << low.error().message;
  ASSERT_TRUE(high.has_value()) << high.error().message;
  EXPECT_GT(*high, *low);
  auto none = capacity(0.001);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message.find("--gpu-memory-utilization"), std::string::npos) << none.error().message;
}

// Greedy `prompts` (max_tokens each, EOS ignored) through an engine of
// `config` on `model` (a load_model spec), with its statistics at the end.
struct EngineRun {
  std::map<request_id, testing::Outcome> outcomes;
  EngineStats stats;
};
// On the CPU, the engine runs the device's bf16 weights in float32 (the
// reference of compare_with_cpu).
EngineRun run_engine(const std::string& model, const EngineConfig& config,
                     const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens) {
  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  EngineRun run;
  auto m = load_model(model);
  EXPECT_TRUE(m.has_value());
  if (!m) return run;
  LoadedModel loaded = std::move(m).value();
  if (config.device.kind == DeviceKind::cpu) loaded = with_f32_matrices(std::move(loaded), true);
  auto engine = Engine::create(sys, config, std::move(loaded));
  EXPECT_TRUE(engine.has_value()) << (engine ? "" : engine.error().message);
  if (!engine) return run;
  run.outcomes = testing::run_greedy(**engine, prompts, max_tokens, /*ignore_eos=*/true);
  auto stats = (*engine)->stats();
  EXPECT_TRUE(stats.has_value());
  if (stats) run.stats = *stats;
  return run;
}

// The reference's top-2 logprob gap after `tokens`, and tau there
// (compare_with_cpu's arithmetic on that one position: twice how far the
// float32 weights move the reference's logprobs, at least 2^-8).
struct TieCheck {
  double gap = 0, tau = 0;
};
TieCheck tie_check(const std::string& model, const std::vector<int32_t>& tokens) {
  auto loaded = [&](bool bf16) {
    auto m = load_model(model);
    EXPECT_TRUE(m.has_value());
    return m ? with_f32_matrices(std::move(m).value(), bf16) : LoadedModel{};
  };
  const int32_t blocks = int32_t(tokens.size()) / kBlock + 2;
  Backend reference = make_from("cpu", loaded(true), int64_t(blocks) * kBlock);
  Backend f32 = make_from("cpu", loaded(false), int64_t(blocks) * kBlock);
  if (!reference.runner || !f32.runner) return {};
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 5;
  Plans rp{blocks}, fp{blocks};
  StepPlan a = rp.step({1}, {tokens}, {0}, &p), b = fp.step({1}, {tokens}, {0}, &p);
  const StepResult r = reference.runner->run(a), f = f32.runner->run(b);
  if (r.tokens.size() != 1 || f.tokens.size() != 1) return {};
  const SampleResult& top = r.tokens[0].result;
  return {double(top.top[0].logprob - top.top[1].logprob),
          std::max(2 * logprob_difference(top, f.tokens[0].result), 1.0 / 256)};
}

// `got`'s streams against `want`'s (greedy continuations of `prompts`, ids
// from 1, `tokens` each): the same, or parting at a near tie, a position
// where the reference's top-2 gap is below 2 tau, which is named. Returns
// how many are the same.
int same_streams(const std::string& model, const std::vector<std::vector<int32_t>>& prompts,
                 const EngineRun& want, const EngineRun& got, size_t tokens) {
  int same = 0;
  for (const auto& [id, outcome] : got.outcomes) {
    EXPECT_EQ(outcome.tokens.size(), tokens) << outcome.message;
    const auto it = want.outcomes.find(id);
    if (it == want.outcomes.end() || it->second.tokens.size() != tokens || outcome.tokens.size() != tokens) continue;
    const std::vector<int32_t>& a = it->second.tokens;
    const size_t at = size_t(std::mismatch(a.begin(), a.end(), outcome.tokens.begin()).first - a.begin());
    if (at == tokens) {
      ++same;
      continue;
    }
    std::vector<int32_t> context = prompts[size_t(id - 1)];
    context.insert(context.end(), a.begin(), a.begin() + std::ptrdiff_t(at));
    const TieCheck tie = tie_check(model, context);
    std::printf("request %llu parts at output token %zu: the reference's top-2 gap %.5f, 2 tau %.5f\n",
                static_cast<unsigned long long>(id), at, tie.gap, 2 * tie.tau);
    EXPECT_LT(tie.gap, 2 * tie.tau) << "request " << id << " parts at output token " << at
                                    << " where the reference's top two are not a near tie";
  }
  return same;
}

// The whole engine on the device: greedy requests through the actors end
// as on the CPU engine running the same bf16 weights in float32, each
// stream the same or parting only at a near tie (same_streams).
TEST(CudaEngine, GreedyRequestsThroughTheActors) {
  SKIP_WITHOUT_DEVICE();
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 6; ++i) prompts.push_back({1, 300 + i, 301 + i});
  auto run = [&](const std::string& device) {
    EngineConfig c;
    c.device = *parse_device(device);
    c.kv_cache_tokens = 64 * kBlock;
    c.kv_cache_dtype = KvDtype::bf16;
    return run_engine(shared("tiny-random-llama-f32.gguf"), c, prompts, 24);
  };
  const EngineRun cpu = run("cpu"), gpu = run("cuda");
  ASSERT_EQ(gpu.outcomes.size(), prompts.size());
  const int same = same_streams(shared("tiny-random-llama-f32.gguf"), prompts, cpu, gpu, 24);
  std::printf("greedy streams equal to the CPU engine's: %d of %zu\n", same, prompts.size());
}

// Prompt logprobs through the actors on the device: prompts prefilled in
// chunks beside each other, with the executor pipelining, score every prompt
// token as the CPU engine on the device's weights does, within the runner
// test's tolerance (tau from the CPU engine on unrounded float32 weights).
TEST(CudaEngine, PromptLogprobsAsOnTheCpu) {
  SKIP_WITHOUT_DEVICE();
  const std::string model = shared("tiny-random-llama-f32.gguf");
  std::vector<std::vector<int32_t>> prompts(3);
  for (int32_t i = 0; i < 100; ++i)  // the model's context is 128
    for (size_t p = 0; p < prompts.size(); ++p) prompts[p].push_back(i == 0 ? 1 : 3 + (i * int32_t(31 + 6 * p)) % 900);
  auto run = [&](const std::string& device, bool bf16) {
    testing::EngineSystemConfig cfg;
    caf::actor_system sys{cfg};
    auto m = load_model(model);
    EXPECT_TRUE(m.has_value());
    LoadedModel loaded = std::move(m).value();
    if (device == "cpu") loaded = with_f32_matrices(std::move(loaded), bf16);
    EngineConfig c;
    c.device = *parse_device(device);
    c.kv_cache_tokens = 64 * kBlock;
    c.kv_cache_dtype = KvDtype::bf16;
    c.prefill_chunk = 32;
    c.max_batched_tokens = 64;
    auto engine = Engine::create(sys, c, std::move(loaded));
    EXPECT_TRUE(engine.has_value()) << (engine ? "" : engine.error().message);
    testing::Collector collector;
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestSpec spec = testing::greedy_spec(i + 1, prompts[i], 4, /*ignore_eos=*/true);
      spec.request.prompt_logprobs = 1;
      (*engine)->submit(std::move(spec), collector.callback_for(i + 1));
    }
    EXPECT_TRUE(collector.wait_for(prompts.size()));
    return collector.outcomes();
  };
  const auto ref = run("cpu", true), fl = run("cpu", false), dev = run("cuda", true);
  double d_w = 0, d_device = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto &r = ref.at(i + 1).prompt_logprobs, &f = fl.at(i + 1).prompt_logprobs, &d = dev.at(i + 1).prompt_logprobs;
    EXPECT_EQ(dev.at(i + 1).finish, FinishReason::length) << dev.at(i + 1).message;
    ASSERT_EQ(r.size(), prompts[i].size() - 1);
    ASSERT_EQ(d.size(), r.size()) << "request " << i;
    for (size_t k = 0; k < r.size(); ++k) {
      EXPECT_EQ(d[k].token, prompts[i][k + 1]);
      d_w = std::max(d_w, double(std::fabs(f[k].logprob - r[k].logprob)));
      d_device = std::max(d_device, double(std::fabs(d[k].logprob - r[k].logprob)));
    }
  }
  const double tau = std::max(2 * d_w, 1.0 / 256);
  EXPECT_LE(d_device, tau) << "d_w " << d_w;
  std::printf("prompt logprobs through the engine: d_w %.5f, tau %.5f, device %.5f\n", d_w, tau, d_device);
}

// Speculative decoding on the device (--speculative ngram) through the
// actors: on the random-weight Llama file, whose greedy output repeats itself
// so prompt lookup drafts well, the streams are those of plain decoding on
// the device (or part at a named near tie), and drafts were accepted.
TEST(CudaEngine, NgramSpeculationKeepsTheGreedyStreams) {
  SKIP_WITHOUT_DEVICE();
  const std::string model = shared("tiny-random-llama-f32.gguf");
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 3; ++i) prompts.push_back({1, 300 + i, 301 + i, 300 + i, 301 + i});
  auto run = [&](bool speculate) {
    EngineConfig c;
    c.device = *parse_device("cuda");
    c.kv_cache_tokens = 64 * kBlock;
    c.kv_cache_dtype = KvDtype::bf16;
    if (speculate) c.speculative.method = SpeculativeMethod::ngram;
    return run_engine(model, c, prompts, 40);
  };
  const EngineRun plain = run(false), speculative = run(true);
  ASSERT_EQ(speculative.outcomes.size(), prompts.size());
  const int same = same_streams(model, prompts, plain, speculative, 40);
  EXPECT_GT(speculative.stats.spec_accepted_tokens, 0u);
  std::printf("streams equal with and without speculation: %d of %zu; drafts %llu, accepted %llu of %llu\n", same,
              prompts.size(), static_cast<unsigned long long>(speculative.stats.spec_drafts),
              static_cast<unsigned long long>(speculative.stats.spec_accepted_tokens),
              static_cast<unsigned long long>(speculative.stats.spec_draft_tokens));
}

// Jump-forward on the device: a JSON schema's forced bytes are verified as
// drafts (drafts are accepted), and every output, greedy and seeded at
// temperature 1, is a complete record. How many streams equal the device's
// run without jump-forward is printed (verify spans change the products'
// shapes, which may move a near tie).
TEST(CudaEngine, JumpForwardUnderAGrammar) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = shared("tiny-random-llama-f32.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto loaded = load_model(path);
  ASSERT_TRUE(loaded.has_value());
  auto schema = grammar::grammar_from_json_schema(
      R"({"type":"object","properties":{"name":{"enum":["alpha","beta gamma"]},)"
      R"("count":{"type":"integer","minimum":0,"maximum":99},"ok":{"type":"boolean"}},)"
      R"("required":["name","count","ok"]})");
  ASSERT_TRUE(schema.has_value()) << schema.error().message;
  const auto ir = std::make_shared<const grammar::Grammar>(std::move(schema).value());
  const std::vector<int32_t> prompt = loaded->tokenizer->encode("Give me a record:", /*add_bos=*/true);
  auto run = [&](bool jump_forward, float temperature, EngineStats& stats) {
    testing::EngineSystemConfig cfg;
    caf::actor_system sys{cfg};
    EngineConfig c;
    c.device = *parse_device("cuda");
    c.kv_cache_tokens = 64 * kBlock;
    c.kv_cache_dtype = KvDtype::bf16;
    c.speculative.jump_forward = jump_forward;
    auto engine = Engine::create(sys, c, *loaded);
    EXPECT_TRUE(engine.has_value()) << (engine ? "" : engine.error().message);
    testing::Collector collector;
    for (uint64_t i = 0; i < 3; ++i) {
      RequestSpec spec = testing::greedy_spec(i + 1, prompt, 100);
      spec.request.sampling.temperature = temperature;
      spec.request.sampling.has_seed = true;
      spec.request.sampling.seed = 5 + i;
      spec.request.sampling.grammar.ir = ir;
      (*engine)->submit(spec, collector.callback_for(i + 1));
    }
    EXPECT_TRUE(collector.wait_for(3));
    stats = *(*engine)->stats();
    return collector.outcomes();
  };
  for (float temperature : {0.0f, 1.0f}) {
    EngineStats plain_stats, jump_stats;
    const auto plain = run(false, temperature, plain_stats), jumped = run(true, temperature, jump_stats);
    int same = 0;
    for (const auto& [id, o] : jumped) {
      EXPECT_EQ(o.finish, FinishReason::stop) << o.message;
      boost::system::error_code ec;
      const boost::json::value v = boost::json::parse(o.text, ec);
      ASSERT_FALSE(ec) << o.text;
      EXPECT_TRUE(v.as_object().contains("ok")) << o.text;
      same += plain.at(id).tokens == o.tokens ? 1 : 0;
    }
    EXPECT_EQ(plain_stats.spec_drafts, 0u);
    EXPECT_GT(jump_stats.spec_accepted_tokens, 0u) << "temperature " << temperature;
    std::printf("temperature %.0f: %d of 3 streams as without jump-forward; %llu of %llu drafts accepted\n",
                double(temperature), same, static_cast<unsigned long long>(jump_stats.spec_accepted_tokens),
                static_cast<unsigned long long>(jump_stats.spec_draft_tokens));
  }
}

// Long prompts through the actors, on the embedded default model (context
// 512), f16 KV on both engines: two 300-token prompts prefilled together in
// 64-token chunks (their last chunks, past position 256, attend over two
// partitions each: twice the attention workspace of one), and a third
// prompt extending the first, which finds its blocks in the prefix cache.
// The streams end as on the CPU engine (or part at a named near tie).
TEST(CudaEngine, ChunkedLongPromptsWithACachedPrefixEndAsOnTheCpu) {
  SKIP_WITHOUT_DEVICE();
  std::vector<std::vector<int32_t>> prompts(2);
  for (int32_t i = 0; i < 300; ++i) {
    prompts[0].push_back(3 + (i * 37) % 250);
    prompts[1].push_back(3 + (i * 53 + 11) % 250);
  }
  prompts.push_back(prompts[0]);
  prompts.back().insert(prompts.back().end(), {40, 41, 42, 43, 44, 45});
  auto run = [&](const std::string& device) {
    EngineConfig c;
    c.device = *parse_device(device);
    c.kv_cache_tokens = 3 * 512;
    c.kv_cache_dtype = KvDtype::f16;
    c.prefill_chunk = 64;
    c.max_batched_tokens = 128;
    return run_engine("", c, prompts, 16);  // "": the embedded default model
  };
  const EngineRun cpu = run("cpu"), gpu = run("cuda");
  ASSERT_EQ(gpu.outcomes.size(), prompts.size());
  const int same = same_streams("", prompts, cpu, gpu, 16);
  const uint64_t hits = gpu.stats.blocks.prefix_hit_tokens;
  std::printf("streams equal to the CPU engine's: %d of %zu (%llu prompt tokens from the prefix cache)\n", same,
              prompts.size(), static_cast<unsigned long long>(hits));
  EXPECT_GT(hits, 0u) << "the third request was meant to find the first's prompt cached";
}

// Preemption by swap on the device, through the actors: with a pool too
// small for the batch, sequences are swapped out to pinned memory and back
// (CudaSwapEngine's streams) while the pipelined executor runs the others,
// and every stream ends as in a pool with room for all (or parts at a
// named near tie: other batch shapes sum the products in another order).
TEST(CudaEngine, SwapUnderMemoryPressureEndsAsWithRoomToSpare) {
  SKIP_WITHOUT_DEVICE();
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 12; ++i) prompts.push_back({1, 200 + 7 * i, 201 + 3 * i, 5 + i});
  // bf16 in blocks of 4, and the 8-bit cache (q8_0) in blocks of 16 (on a
  // model whose heads are whole 32-value blocks).
  struct Case {
    KvDtype dtype;
    int32_t block;
    const char* model;
  };
  for (const Case& k : {Case{KvDtype::bf16, 4, "tiny-random-llama-f32.gguf"},
                        Case{KvDtype::q8_0, 16, "tiny-llama2-q4_k_m.gguf"}}) {
    const KvDtype dtype = k.dtype;
    const std::string model = shared(k.model);
    SCOPED_TRACE(kv_dtype_name(dtype));
    auto run = [&](int64_t kv_tokens) {
      EngineConfig c;
      c.device = DeviceSpec{DeviceKind::cuda, 0};
      c.block_size = k.block;
      c.kv_cache_tokens = kv_tokens;
      c.swap_space_tokens = 1024;
      c.preemption = PreemptionMode::swap;
      c.kv_cache_dtype = dtype;
      return run_engine(model, c, prompts, 40);
    };
    const EngineRun roomy = run(2048), tight = run(4 * 40);
    const uint64_t swaps = tight.stats.preemptions_swap;
    EXPECT_EQ(roomy.stats.preemptions_swap, 0u);
    EXPECT_GT(swaps, 0u) << "the pool was meant to force swapping";
    ASSERT_EQ(tight.outcomes.size(), prompts.size());
    const int same = same_streams(model, prompts, roomy, tight, 40);
    std::printf("%s: streams equal with and without swapping: %d of %zu (%llu swaps)\n", kv_dtype_name(dtype), same,
                prompts.size(), static_cast<unsigned long long>(swaps));
  }
}

}  // namespace
}  // namespace conveyor
