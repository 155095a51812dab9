// HostSampling (backends/host_sampling.hpp), which both runners use, and the
// bf16 packing the CUDA runner uploads (model/bf16_pack.hpp): host
// code of the CUDA backend, tested on every machine.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "backends/host_sampling.hpp"
#include "grammar/grammar.hpp"
#include "grammar/matcher.hpp"
#include "grammar/vocabulary.hpp"
#include "kernels/cpu/kv_dtype.hpp"
#include "model/bf16_pack.hpp"
#include "model/formats/loader.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

constexpr int32_t kVocab = 40;

// Three sequences starting now, one token each, all wanting logits.
StepPlan first_plan(const SamplingParams& params) {
  StepPlan plan;
  const int32_t table[] = {0};
  for (seq_id id : {7, 8, 9}) {
    const int32_t token = int32_t(id);
    plan.batch.add_sequence(std::span(&token, 1), 0, table, true);
    plan.seq_ids.push_back(id);
    plan.new_samplers.emplace_back(id, params);
    plan.new_sampler_prompts.push_back({int32_t(id)});
  }
  return plan;
}

// The next step: each sequence's placeholder for the last sample.
StepPlan next_plan() {
  StepPlan plan;
  const int32_t table[] = {0};
  const int32_t placeholder = -1;
  for (seq_id id : {7, 8, 9}) {
    plan.batch.add_sequence(std::span(&placeholder, 1), 1, table, true);
    plan.seq_ids.push_back(id);
  }
  return plan;
}

std::vector<float> random_logits(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(size_t(3) * kVocab);
  for (float& x : v) x = dist(rng);
  return v;
}

// Row r's argmax.
std::vector<int32_t> argmaxes(const std::vector<float>& logits) {
  std::vector<int32_t> picks;
  for (int32_t r = 0; r < 3; ++r) {
    const float* row = logits.data() + r * kVocab;
    picks.push_back(int32_t(std::max_element(row, row + kVocab) - row));
  }
  return picks;
}

// A grammar over kVocab tokens: token t is the text "a" repeated t % 3 + 1
// times (0: the end token, "" never allowed); the grammar asks for "a"s in
// runs of exactly 2 or 4 (so the allowed set changes with the position).
GrammarConstraint pairs_of_a() {
  std::vector<std::string> texts(kVocab);
  for (int32_t t = 1; t < kVocab; ++t) texts[size_t(t)] = std::string(size_t(t % 3 + 1), 'a');
  grammar::GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {b.byte('a'), b.byte('a'), b.rule_ref(root)});
  b.add_alternative(root, {b.byte('a'), b.byte('a'), b.byte('a'), b.byte('a')});
  auto g = std::move(b).build(root);
  EXPECT_TRUE(g) << g.error().message;
  auto vocab = grammar::index_vocabulary({texts, {0}});
  auto compiled = grammar::compile(*g, vocab);
  EXPECT_TRUE(compiled) << compiled.error().message;
  return GrammarConstraint{std::make_shared<const grammar::Grammar>(*g), *compiled};
}

// Masks prepared on the prefetch worker while "the forward pass runs" give
// exactly the samples of masks computed when the logits arrive (seeded
// draws, so the generators must stay in step too), and the worker does
// prepare them.
TEST(HostSampling, MasksPreparedAheadSampleAlike) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.seed = 5;
  p.has_seed = true;
  p.max_tokens = 64;
  p.grammar = pairs_of_a();
  HostSampling plain, ahead;
  ahead.prefetch_masks(true);
  StepPlan a = first_plan(p), b = first_plan(p);
  plain.begin(a);
  ahead.begin(b);
  for (int step = 0; step < 30; ++step) {
    std::vector<float> la = random_logits(uint32_t(100 + step)), lb = la;
    StepResult ra, rb;
    plain.sample(a, la.data(), kVocab, ra);
    ahead.sample(b, lb.data(), kVocab, rb);
    ASSERT_EQ(ra.tokens.size(), rb.tokens.size());
    for (size_t i = 0; i < ra.tokens.size(); ++i)
      ASSERT_EQ(ra.tokens[i].result.token, rb.tokens[i].result.token) << "step " << step << ", row " << i;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the forward pass
    a = next_plan();
    b = next_plan();
    plain.begin(a);
    ahead.begin(b);
  }
  EXPECT_GT(ahead.masks_prepared_ahead(), 30u) << "the worker prepared next to no masks";
  EXPECT_EQ(plain.masks_prepared_ahead(), 0u);
  ahead.prefetch_masks(false);
  plain.clear();
  ahead.clear();
  // Destroyed while the worker prepares the masks of the step just sampled:
  // it finishes before the samplers go (ASan would see a freed sampler).
  for (int i = 0; i < 20; ++i) {
    HostSampling gone;
    gone.prefetch_masks(true);
    StepPlan c = first_plan(p);
    gone.begin(c);
    std::vector<float> logits = random_logits(uint32_t(i));
    StepResult r;
    gone.sample(c, logits.data(), kVocab, r);
  }
}

TEST(HostSampling, GreedyPicksMadeElsewhereRecordAsSampling) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  HostSampling sampled, accepted;
  StepPlan a = first_plan(greedy), b = first_plan(greedy);
  sampled.begin(a);
  accepted.begin(b);
  HostSampling::DeviceInputs in;
  ASSERT_TRUE(accepted.device_inputs(b, in));
  EXPECT_EQ(in.uniforms, std::vector<double>(3, 0.0));
  EXPECT_EQ(in.temperature, std::vector<float>(3, 0.0f));
  EXPECT_FALSE(in.penalties);
  std::vector<float> logits = random_logits(1);
  const std::vector<int32_t> picks = argmaxes(logits);
  StepResult from_logits, from_picks;
  sampled.sample(a, logits.data(), kVocab, from_logits);
  accepted.accept(b, picks.data(), from_picks);
  ASSERT_EQ(from_logits.tokens.size(), 3u);
  ASSERT_EQ(from_picks.tokens.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(from_picks.tokens[i].seq, from_logits.tokens[i].seq);
    EXPECT_EQ(from_picks.tokens[i].result.token, from_logits.tokens[i].result.token);
  }
  // The next plan's placeholders get the same last samples either way.
  StepPlan a2 = next_plan(), b2 = next_plan();
  sampled.begin(a2);
  accepted.begin(b2);
  EXPECT_EQ(a2.batch.tokens, b2.batch.tokens);
  EXPECT_EQ(b2.batch.tokens, picks);
  EXPECT_EQ(accepted.samplers().find(7)->generated_count(picks[0]), 1);
}

// A seeded, penalised draw made elsewhere: the inputs carry the penalties'
// tokens, and drawing the uniform there leaves each generator where a host
// sample leaves it, so the next host samples agree.
TEST(HostSampling, DeviceDrawsKeepTheGeneratorsInStep) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.min_p = 0.05f;
  p.frequency_penalty = 0.5f;
  p.repetition_penalty = 1.2f;
  p.seed = 11;
  p.has_seed = true;
  HostSampling sampled, accepted;
  StepPlan a = first_plan(p), b = first_plan(p);
  sampled.begin(a);
  accepted.begin(b);
  HostSampling::DeviceInputs in;
  ASSERT_TRUE(accepted.device_inputs(b, in));
  EXPECT_TRUE(in.penalties);
  EXPECT_EQ(in.temperature, std::vector<float>(3, 0.8f));
  EXPECT_EQ(in.seen_begin, (std::vector<int32_t>{0, 1, 2, 3}));  // each prompt's one token
  EXPECT_EQ(in.seen, (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(in.gen_begin, (std::vector<int32_t>{0, 0, 0, 0}));   // nothing generated yet
  for (double u : in.uniforms) EXPECT_TRUE(u >= 0.0 && u < 1.0) << u;
  // The device's picks: what the host sampled (the kernels' agreement with the
  // host's draw is tests/kernels/cuda's; here only the bookkeeping matters).
  std::vector<float> logits = random_logits(2);
  StepResult first;
  sampled.sample(a, logits.data(), kVocab, first);
  std::vector<int32_t> picks;
  for (const SampledToken& t : first.tokens) picks.push_back(t.result.token);
  StepResult accepted_first;
  accepted.accept(b, picks.data(), accepted_first);
  // Host samples from here on: equal only if both generators drew alike.
  for (uint32_t step = 0; step < 8; ++step) {
    StepPlan a2 = next_plan(), b2 = next_plan();
    sampled.begin(a2);
    accepted.begin(b2);
    std::vector<float> l1 = random_logits(10 + step), l2 = l1;
    StepResult r1, r2;
    sampled.sample(a2, l1.data(), kVocab, r1);
    accepted.sample(b2, l2.data(), kVocab, r2);
    ASSERT_EQ(r1.tokens.size(), r2.tokens.size());
    for (size_t i = 0; i < r1.tokens.size(); ++i)
      EXPECT_EQ(r1.tokens[i].result.token, r2.tokens[i].result.token) << "step " << step << " row " << i;
  }
  StepPlan b3 = next_plan();
  accepted.begin(b3);
  HostSampling::DeviceInputs in3;
  ASSERT_TRUE(accepted.device_inputs(b3, in3));
  EXPECT_EQ(in3.gen_begin.size(), 4u);
  int32_t generated = 0;
  for (int32_t c : in3.gen_counts) generated += c;
  EXPECT_EQ(generated, 3 * 9);  // nine tokens per sequence, with their counts
}

// A plan of the sequences `ids` decoding one token each (a placeholder),
// retiring `retired`.
StepPlan decode_plan(std::vector<seq_id> ids, std::vector<seq_id> retired = {}) {
  StepPlan plan;
  const int32_t table[] = {0};
  const int32_t placeholder = -1;
  for (seq_id id : ids) {
    plan.batch.add_sequence(std::span(&placeholder, 1), 1, table, true);
    plan.seq_ids.push_back(id);
  }
  plan.retired = std::move(retired);
  return plan;
}

// The device's ids, made from the uniforms alone.
std::vector<int32_t> picks_of(const HostSampling::DeviceInputs& in) {
  std::vector<int32_t> picks;
  for (double u : in.uniforms) picks.push_back(int32_t(u * kVocab));
  return picks;
}

// A pipelined runner launches step k + 1 (begin_ahead, device_inputs) before
// step k's ids are recorded (accept): the uniforms, the placeholders (filled
// on the device from step k's rows) and the recorded samples are those of
// steps run in turn, and a sequence the next plan retires still gets its
// last sample recorded before its sampler goes.
TEST(HostSampling, StepsLaunchedAheadDrawAndRecordAsStepsInTurn) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 20;
  p.seed = 5;
  p.has_seed = true;
  auto plans = [&] {
    std::vector<StepPlan> v;
    v.push_back(first_plan(p));
    v.push_back(decode_plan({7, 8, 9}));
    v.push_back(decode_plan({9, 7, 8}));  // rows in another order than the step before
    v.push_back(decode_plan({7, 8}, {9}));
    v.push_back(decode_plan({8, 7}));
    return v;
  };
  std::vector<StepPlan> in_turn = plans(), ahead = plans();
  HostSampling a, b;
  HostSampling::DeviceInputs in;
  std::vector<std::vector<double>> uniforms;
  std::vector<StepResult> results(in_turn.size());
  std::vector<std::vector<int32_t>> picks;
  for (size_t k = 0; k < in_turn.size(); ++k) {
    a.begin(in_turn[k]);
    ASSERT_TRUE(a.device_inputs(in_turn[k], in));
    uniforms.push_back(in.uniforms);
    picks.push_back(picks_of(in));
    a.accept(in_turn[k], picks.back().data(), results[k]);
  }
  b.begin(ahead[0]);
  ASSERT_TRUE(b.device_inputs(ahead[0], in));
  EXPECT_EQ(in.uniforms, uniforms[0]);
  HostSampling::Fills fills;
  for (size_t k = 1; k < ahead.size(); ++k) {
    b.begin_ahead(ahead[k], ahead[k - 1], fills);
    ASSERT_TRUE(b.device_inputs(ahead[k], in));
    EXPECT_EQ(in.uniforms, uniforms[k]) << k;
    EXPECT_EQ(in.previous_row, std::vector<int32_t>(in.uniforms.size(), -1)) << "no penalties here";
    // The device fills the placeholders from step k - 1's rows.
    EXPECT_EQ(fills.size(), ahead[k].seq_ids.size()) << k;
    for (const auto& [at, row] : fills) ahead[k].batch.tokens[size_t(at)] = picks[k - 1][size_t(row)];
    EXPECT_EQ(ahead[k].batch.tokens, in_turn[k].batch.tokens) << k;
    StepResult r;
    b.accept(ahead[k - 1], picks[k - 1].data(), r);
    ASSERT_EQ(r.tokens.size(), results[k - 1].tokens.size()) << k;
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      EXPECT_EQ(r.tokens[i].seq, results[k - 1].tokens[i].seq);
      EXPECT_EQ(r.tokens[i].result.token, results[k - 1].tokens[i].result.token);
    }
    if (k == 3) {  // plan 3 retires 9: gone once step 2's samples are recorded
      EXPECT_EQ(b.samplers().find(9), nullptr);
      EXPECT_EQ(r.tokens.size(), 3u);
    }
  }
  EXPECT_EQ(b.samplers().size(), a.samplers().size());
  EXPECT_EQ(b.samplers().find(7)->generated_count(picks[3][0]), a.samplers().find(7)->generated_count(picks[3][0]));
}

// Penalties count the last sample: a plan launched ahead of it leaves it
// to the device (the row that sampled it in the pending step), and once it
// is recorded (a runner that waited for it) the lists hold it instead.
TEST(HostSampling, PenaltiesOfAPendingSampleAreCountedOnTheDevice) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.presence_penalty = 0.5f;
  p.repetition_penalty = 1.2f;
  HostSampling s;
  StepPlan first = first_plan(p);
  first.new_samplers[2].second = SamplingParams{};  // 9: no penalties
  first.new_samplers[2].second.temperature = 0.0f;
  s.begin(first);
  StepPlan next = decode_plan({9, 7, 8});
  HostSampling::Fills fills;
  s.begin_ahead(next, first, fills);
  EXPECT_EQ(fills.size(), 3u);
  HostSampling::DeviceInputs in;
  ASSERT_TRUE(s.device_inputs(next, in));
  EXPECT_TRUE(in.penalties);
  EXPECT_EQ(in.previous_row, (std::vector<int32_t>{-1, 0, 1}));  // 7 and 8 were rows 0 and 1
  EXPECT_EQ(in.seen, (std::vector<int32_t>{7, 8}));               // their prompts only
  EXPECT_TRUE(in.generated.empty());
  const std::vector<int32_t> picks = {1, 2, 3};
  StepResult r;
  s.accept(first, picks.data(), r);
  ASSERT_TRUE(s.device_inputs(next, in));
  EXPECT_EQ(in.previous_row, (std::vector<int32_t>{-1, -1, -1}));
  EXPECT_EQ(in.seen, (std::vector<int32_t>{1, 7, 2, 8}));
  EXPECT_EQ(in.generated, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(in.gen_counts, (std::vector<int32_t>{1, 1}));
}

TEST(HostSampling, OnlyRowsADeviceCanSampleAreLeftToIt) {
  auto device = [](SamplingParams p, bool fork = false) {
    HostSampling s;
    StepPlan plan = first_plan(p);
    if (fork) plan.forks.emplace_back(7, 8);
    s.begin(plan);
    HostSampling::DeviceInputs in;
    return s.device_inputs(plan, in);
  };
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  EXPECT_TRUE(device(greedy));
  EXPECT_FALSE(device(greedy, /*fork=*/true));
  SamplingParams p = greedy;
  p.logprobs = 0;
  EXPECT_FALSE(device(p));
  p = greedy;
  p.repetition_penalty = 1.1f;
  p.frequency_penalty = 0.5f;
  EXPECT_TRUE(device(p));
  p = greedy;
  p.top_k = 5;  // ignored by greedy sampling
  EXPECT_TRUE(device(p));
  p = SamplingParams{};  // temperature 1, min-p, top-k, top-p: all the device's
  p.min_p = 0.1f;
  p.top_k = 5;
  p.top_p = 0.9f;
  EXPECT_TRUE(device(p));
  p.logprobs = 2;
  EXPECT_FALSE(device(p));
}

// Every matrix of a quantized file (Q4_K and Q6_K in a Q4_K_M file) packs to
// its rows decoded and rounded to bf16, stacked in order.
TEST(PackBf16, DecodesEachStoredTypeThenRounds) {
  const std::string path = test::shared_model_path("tiny-llama2-q4_k_m.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto model = load_model(path);
  ASSERT_TRUE(model.has_value()) << model.error().message;
  const ModelConfig& c = model->config;
  const LayerWeights& l = model->weights.layers[0];
  const std::vector<uint16_t> qkv = pack_bf16({&l.wq, &l.wk, &l.wv}, c.dim);
  ASSERT_EQ(qkv.size(), size_t(c.q_dim() + 2 * c.kv_dim()) * c.dim);
  std::vector<float> row(size_t(c.dim));
  const int64_t q_rows = c.q_dim(), k_rows = c.kv_dim();
  for (int64_t r : {int64_t(0), q_rows - 1, q_rows, q_rows + k_rows + 3}) {
    const WeightMatrix& m = r < q_rows ? l.wq : r < q_rows + k_rows ? l.wk : l.wv;
    const int64_t local = r < q_rows ? r : r < q_rows + k_rows ? r - q_rows : r - q_rows - k_rows;
    m.decode_row(local, c.dim, row.data());
    for (int32_t i = 0; i < c.dim; ++i)
      ASSERT_EQ(qkv[size_t(r * c.dim + i)], kernels::kv_half::f32_to_bf16(row[size_t(i)])) << r << " " << i;
  }
  const std::vector<uint16_t> down = pack_bf16({&l.w2}, c.hidden_dim);
  ASSERT_EQ(down.size(), size_t(c.dim) * c.hidden_dim);
  row.resize(size_t(c.hidden_dim));
  l.w2.decode_row(c.dim - 1, c.hidden_dim, row.data());
  for (int32_t i = 0; i < c.hidden_dim; ++i)
    ASSERT_EQ(down[size_t(int64_t(c.dim - 1) * c.hidden_dim + i)], kernels::kv_half::f32_to_bf16(row[size_t(i)]));
}

}  // namespace
}  // namespace conveyor

namespace conveyor {
namespace {

// A verify step (want_logits counting 1 + drafts; engine/speculation.hpp)
// keeps the target distribution: over many seeds, the first token follows
// row 0's distribution whatever the draft, the draft is accepted as often
// as row 0 gives it, and the token after an accepted draft follows row 1's.
// A chi-square test on 40,000 draws of an 8-token vocabulary.
TEST(HostSamplingVerify, KeepsTheTargetDistribution) {
  constexpr int32_t kSmall = 8, kTrials = 40000, kDraft = 2;
  const std::vector<double> p0 = {0.05, 0.10, 0.30, 0.05, 0.20, 0.10, 0.15, 0.05};
  const std::vector<double> p1 = {0.40, 0.02, 0.08, 0.10, 0.10, 0.05, 0.05, 0.20};
  std::vector<float> rows(2 * kSmall);
  for (int32_t t = 0; t < kSmall; ++t) {
    rows[size_t(t)] = float(std::log(p0[size_t(t)]));
    rows[size_t(kSmall + t)] = float(std::log(p1[size_t(t)]));
  }
  std::vector<int64_t> first(kSmall, 0), second(kSmall, 0);
  int64_t accepted = 0;
  for (int32_t trial = 0; trial < kTrials; ++trial) {
    SamplingParams params;
    params.temperature = 1.0f;
    params.has_seed = true;
    params.seed = uint64_t(trial) * 2654435761u + 1;
    StepPlan plan;
    const int32_t table[] = {0};
    const int32_t span[] = {5, kDraft};  // the last token, then one draft
    plan.batch.add_sequence(span, 0, table, 2);
    plan.seq_ids.push_back(1);
    plan.new_samplers.emplace_back(1, params);
    plan.new_sampler_prompts.push_back({5});
    HostSampling sampling;
    sampling.begin(plan);
    std::vector<float> logits = rows;
    StepResult result;
    sampling.sample(plan, logits.data(), kSmall, result);
    ASSERT_GE(result.tokens.size(), 1u);
    const int32_t t0 = result.tokens[0].result.token;
    ++first[size_t(t0)];
    if (t0 == kDraft) {
      ++accepted;
      ASSERT_EQ(result.tokens.size(), 2u);
      ++second[size_t(result.tokens[1].result.token)];
    } else {
      ASSERT_EQ(result.tokens.size(), 1u);  // a rejected draft: its row is not sampled
    }
  }
  auto chi_square = [](const std::vector<int64_t>& counts, const std::vector<double>& p) {
    int64_t n = 0;
    for (int64_t c : counts) n += c;
    double x = 0;
    for (size_t t = 0; t < p.size(); ++t) {
      const double expected = double(n) * p[t];
      x += (double(counts[t]) - expected) * (double(counts[t]) - expected) / expected;
    }
    return x;
  };
  // 7 degrees of freedom: P(chi2 > 24.3) = 0.001.
  EXPECT_LT(chi_square(first, p0), 24.3);
  EXPECT_LT(chi_square(second, p1), 24.3);
  EXPECT_NEAR(double(accepted) / kTrials, p0[kDraft], 0.015);
}

}  // namespace
}  // namespace conveyor
