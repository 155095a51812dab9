// The draft model's cache bookkeeping (backends/cpu/draft_model.hpp), with
// plans built by hand: a sequence whose leading blocks the prefix cache
// shares does not run the draft model over them again when the draft's cache
// already holds them, and a block the draft model wrote again for other
// tokens is not taken for them. stories260K (trained weights) as the draft.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "backends/cpu/draft_model.hpp"
#include "engine/speculation.hpp"
#include "model/formats/loader.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

constexpr int32_t kBlock = 4;

class DraftModelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = test::shared_model_path("stories260K.bin");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "stories260K.bin is not in " << CONVEYOR_SHARED_MODELS;
    auto loaded = load_model(path);
    ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
    config_ = loaded->config;
    transformer_ = std::make_shared<Transformer>(loaded->config, std::move(loaded->weights), 1);
  }

  std::unique_ptr<DraftModel> make_draft() const {
    auto kv = std::make_shared<KvCache>(KvCacheShape::for_model(config_, kBlock, 64, KvDtype::f32));
    return std::make_unique<DraftModel>(transformer_, std::move(kv));
  }

  // A step where sequence `id` first shows up with `prompt` and the target
  // computes prompt[start..] (the positions before `start` came from the prefix cache).
  static StepPlan prefill(seq_id id, const std::vector<int32_t>& prompt, int32_t start,
                          const std::vector<int32_t>& table) {
    StepPlan plan;
    plan.new_samplers.emplace_back(id, SamplingParams{});
    plan.new_sampler_prompts.push_back(prompt);
    plan.seq_ids.push_back(id);
    plan.batch.add_sequence(std::span<const int32_t>(prompt).subspan(size_t(start)), start, table, 1);
    return plan;
  }

  // A verify step of sequence `id` at position `start`: its last token and three drafts to write.
  static StepPlan verify(seq_id id, int32_t last, int32_t start, const std::vector<int32_t>& table) {
    StepPlan plan;
    plan.seq_ids.push_back(id);
    const std::vector<int32_t> span = {last, kModelDraft, kModelDraft, kModelDraft};
    plan.batch.add_sequence(span, start, table, 4);
    return plan;
  }

  static std::vector<int32_t> drafts(const StepPlan& plan) {
    const auto tokens = plan.batch.seq_tokens(0);
    return {tokens.begin() + 1, tokens.end()};
  }

  ModelConfig config_;
  std::shared_ptr<Transformer> transformer_;
};

std::vector<int32_t> tokens_from(int32_t first, int32_t n) {
  std::vector<int32_t> t = {1};  // BOS
  for (int32_t i = 1; i < n; ++i) t.push_back(first + 7 * i % 300);
  return t;
}

TEST_F(DraftModelCache, ASharedPrefixTheDraftHoldsIsNotRunAgain) {
  const std::vector<int32_t> a = tokens_from(20, 16);
  std::vector<int32_t> b(a.begin(), a.begin() + 12);  // a's first three blocks, then its own
  for (int32_t t : {400, 401, 402, 403}) b.push_back(t);
  const std::vector<int32_t> table_a = {0, 1, 2, 3, 4, 5};
  const std::vector<int32_t> table_b = {0, 1, 2, 10, 11, 12};  // the prefix cache shares blocks 0-2

  auto draft = make_draft();
  StepPlan step = prefill(1, a, 0, table_a);
  draft->prepare(step);
  EXPECT_EQ(draft->caught_up(), 0);  // nobody drafts: the draft model does not run
  step = verify(1, 50, 16, table_a);
  draft->prepare(step);
  EXPECT_EQ(draft->caught_up(), 16);  // a's prompt, once

  step = prefill(2, b, 12, table_b);
  draft->prepare(step);
  step = verify(2, 60, 16, table_b);
  draft->prepare(step);
  EXPECT_EQ(draft->caught_up(), 16 + 4) << "b ran over the three blocks it shares with a again";
  const std::vector<int32_t> shared = drafts(step);

  // The same drafts as a draft model that ran over all of b.
  auto fresh = make_draft();
  step = prefill(2, b, 12, table_b);
  fresh->prepare(step);
  step = verify(2, 60, 16, table_b);
  fresh->prepare(step);
  EXPECT_EQ(fresh->caught_up(), 16);
  EXPECT_EQ(drafts(step), shared);
}

TEST_F(DraftModelCache, ABlockWrittenAgainForOtherTokensIsNotTaken) {
  const std::vector<int32_t> a = tokens_from(20, 16);
  const std::vector<int32_t> c = tokens_from(90, 6);
  auto draft = make_draft();
  StepPlan step = prefill(1, a, 0, {0, 1, 2, 3, 4, 5});
  draft->prepare(step);
  step = verify(1, 50, 16, {0, 1, 2, 3, 4, 5});
  draft->prepare(step);
  ASSERT_EQ(draft->caught_up(), 16);
  // a ends; c gets its blocks 1 and 2 (freed, not cached) and drafts: the
  // draft model writes c's positions 4-7 into block 1 and 8-9 into block 2,
  // neither of which it fills.
  StepPlan end;
  end.retired.push_back(1);
  draft->prepare(end);
  const std::vector<int32_t> table_c = {20, 1, 2, 21};
  step = prefill(3, c, 0, table_c);
  draft->prepare(step);
  step = verify(3, 70, 6, table_c);
  draft->prepare(step);
  ASSERT_EQ(draft->caught_up(), 16 + 6);
  // A sequence with a's prompt whose table has a's blocks 0-3 (as if cached):
  // only block 0 still holds a's keys and values in the draft's cache.
  const std::vector<int32_t> table_d = {0, 1, 2, 3, 30, 31};
  step = prefill(4, a, 12, table_d);
  draft->prepare(step);
  step = verify(4, 50, 16, table_d);
  draft->prepare(step);
  EXPECT_EQ(draft->caught_up(), 16 + 6 + 12);
}

}  // namespace
}  // namespace conveyor
