#include "backends/prompt_scoring.hpp"

#include <algorithm>

#include "model/sampling/filters.hpp"

namespace conveyor {

PromptLogprob score_position(std::span<const float> logits, int32_t target, int32_t top) {
  PromptLogprob out;
  out.token = target;
  const float log_normalizer = sampling::log_sum_exp(logits);
  const float value = logits[size_t(target)];
  out.logprob = value - log_normalizer;
  int32_t above = 0;
  for (float l : logits) above += l > value ? 1 : 0;
  out.rank = above + 1;
  if (top > 0) {
    thread_local std::vector<sampling::Candidate> candidates;
    sampling::top_k(logits, std::min(top, kMaxLogprobs), candidates);
    out.top.reserve(candidates.size());
    for (const auto& [logit, token] : candidates) out.top.push_back({token, logit - log_normalizer});
  }
  return out;
}

void score_prompts(const StepPlan& plan, int32_t vocab, const RowLogits& logits_of, StepResult& result) {
  std::vector<int32_t> rows;
  std::vector<float> logits;
  for (const PromptScoring& p : plan.score) {
    PromptScores out;
    out.seq = plan.seq_ids[size_t(p.slot)];
    out.first = p.first;
    const auto count = int32_t(p.targets.size());
    out.entries.resize(size_t(count));
    const int32_t first_row = plan.batch.seq_token_begin[size_t(p.slot)] + p.row_offset;
    for (int32_t done = 0; done < count; done += kScoredRowsPerPass) {
      const int32_t n = std::min(kScoredRowsPerPass, count - done);
      rows.resize(size_t(n));
      for (int32_t i = 0; i < n; ++i) rows[size_t(i)] = first_row + done + i;
      logits_of(rows, logits);
#pragma omp parallel for schedule(static) if (n > 4)
      for (int32_t i = 0; i < n; ++i) {
        const std::span<const float> row(logits.data() + size_t(i) * size_t(vocab), size_t(vocab));
        out.entries[size_t(done + i)] = score_position(row, p.targets[size_t(done + i)], p.top);
      }
    }
    result.prompt_scores.push_back(std::move(out));
  }
}

}  // namespace conveyor
