#include "backends/cpu/cpu_step_runner.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace conveyor {

CpuStepRunner::CpuStepRunner(std::shared_ptr<Transformer> transformer, std::shared_ptr<KvCache> kv)
    : transformer_(std::move(transformer)), kv_(std::move(kv)) {}

void CpuStepRunner::reset() {
  sampling_.clear();
  if (draft_) draft_->reset();
}

StepResult CpuStepRunner::run(StepPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  sampling_.begin(plan);
  copy_host_blocks(*kv_, plan.copies);
  if (draft_) draft_->prepare(plan);  // its copies too; the plan's kModelDraft tokens become its drafts

  StepResult result;
  result.iteration = plan.iteration;
  if (plan.batch.num_seqs() > 0) transformer_->forward(plan.batch, *kv_, logits_);
  sampling_.sample(plan, logits_.data(), transformer_->config().vocab_size, result);
  if (!plan.score.empty()) {
    Transformer& t = *transformer_;
    score_prompts(plan, t.config().vocab_size,
                  [&t](std::span<const int32_t> rows, std::vector<float>& logits) { t.logits_of(rows, logits); },
                  result);
  }
  result.forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace conveyor
