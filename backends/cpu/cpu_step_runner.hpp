// The CPU backend's StepRunner (engine/step_runner.hpp): the transformer
// forward pass (backends/cpu/transformer.hpp) over the KV pool, then host
// sampling (backends/host_sampling.hpp).
#pragma once

#include <memory>
#include <vector>

#include "backends/cpu/draft_model.hpp"
#include "backends/cpu/transformer.hpp"
#include "backends/host_sampling.hpp"
#include "backends/prompt_scoring.hpp"
#include "engine/step_runner.hpp"
#include "model/kv_cache.hpp"

namespace conveyor {

// The CPU backend. The KV cache is shared with the swap engine, which copies
// blocks of sequences that are not in any plan while this runs.
class CpuStepRunner final : public StepRunner {
 public:
  // `transformer` may be shared with a CpuEmbedder, which only reads its weights.
  CpuStepRunner(std::shared_ptr<Transformer> transformer, std::shared_ptr<KvCache> kv);
  StepResult run(StepPlan& plan) override;
  void reset() override;
  bool scores_prompts() const override { return true; }
  bool verifies_drafts() const override { return true; }
  bool drafts_with_model() const override { return draft_ != nullptr; }
  // --speculative draft:FILE: writes the plans' kModelDraft tokens (backends/cpu/draft_model.hpp).
  void set_draft_model(std::unique_ptr<DraftModel> draft) { draft_ = std::move(draft); }

 private:
  std::shared_ptr<Transformer> transformer_;
  std::shared_ptr<KvCache> kv_;
  HostSampling sampling_;
  std::vector<float> logits_;
  std::unique_ptr<DraftModel> draft_;
};

}  // namespace conveyor
