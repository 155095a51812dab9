// Prompt logprobs on the host, for every backend's StepRunner: the logits of
// the prompt positions a step plan asks to score (StepPlan::score) turned
// into PromptLogprobs of the raw model distribution, as the sampler's
// logprobs are (log-softmax of the logits as the model produced them).
//
// The rows are computed in passes of a bounded number (a 512-token chunk of
// a 150k-token vocabulary would otherwise need 300 MB of logits at once);
// a plan without scoring costs nothing here.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/engine_types.hpp"

namespace conveyor {

// Logits rows scored per pass.
inline constexpr int32_t kScoredRowsPerPass = 64;

// The logprob of `target` under log_softmax(logits) ([vocab]), its rank (1 +
// the tokens with a strictly larger logit) and the `top` most likely tokens
// (most likely first, ties to the lower id).
PromptLogprob score_position(std::span<const float> logits, int32_t target, int32_t top);

// Writes the logits of the batch's token rows `rows` (indices into
// plan.batch.tokens) into `logits`, resized to [rows.size(), vocab].
using RowLogits = std::function<void(std::span<const int32_t> rows, std::vector<float>& logits)>;

// Scores every entry of plan.score into result.prompt_scores, in order.
void score_prompts(const StepPlan& plan, int32_t vocab, const RowLogits& logits_of, StepResult& result);

}  // namespace conveyor
