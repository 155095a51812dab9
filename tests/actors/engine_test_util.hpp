// Helpers for tests that run the whole actor engine: an actor system set up
// as the engine wants it, and a collector that waits for requests to end.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "actors/engine.hpp"

namespace conveyor::testing {

struct EngineSystemConfig : caf::actor_system_config {
  EngineSystemConfig() { add_engine_types(*this); }
};

// What one request produced.
struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::none;
  int finals = 0;
  int32_t cached_prompt_tokens = 0;
  int32_t completion_tokens = 0;  // usage, on the final event
  Errc error_code = Errc::invalid_argument;
  std::string message;
  std::vector<PromptLogprob> prompt_logprobs;  // GenerateRequest::prompt_logprobs, when asked for
};

// Collects the events of many requests; thread-safe (events arrive on actor
// threads). The samples of a request with n > 1 registered with
// callback_for(key) are kept under key + index, one Outcome each.
class Collector {
 public:
  EventCallback callback_for(request_id key) {
    return [this, key](const StreamEvent& e) {
      std::lock_guard lock(mutex_);
      Outcome& o = outcomes_[key + uint64_t(e.index)];
      o.tokens.insert(o.tokens.end(), e.token_ids.begin(), e.token_ids.end());
      o.text += e.text;
      if (!e.prompt_logprobs.empty()) o.prompt_logprobs = e.prompt_logprobs;
      if (e.last()) {
        o.finish = e.finish;
        o.cached_prompt_tokens = e.cached_prompt_tokens;
        o.completion_tokens = e.completion_tokens;
        o.error_code = e.error_code;
        o.message = e.message;
        ++o.finals;
        ++finished_;
        cv_.notify_all();
      }
    };
  }

  // Waits until `n` requests (samples, with n > 1) have ended; false on timeout.
  bool wait_for(size_t n, std::chrono::seconds timeout = std::chrono::seconds(120)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return finished_ >= n; });
  }

  std::map<request_id, Outcome> outcomes() {
    std::lock_guard lock(mutex_);
    return outcomes_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<request_id, Outcome> outcomes_;
  size_t finished_ = 0;
};

// `n` prompts of min_len..max_len tokens drawn from 1..vocab-1 (0 is the
// fake model's end token), the same for the same seed.
inline std::vector<std::vector<int32_t>> random_prompts(size_t n, int32_t vocab, uint64_t seed,
                                                        int32_t min_len = 1, int32_t max_len = 30) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> prompts(n);
  for (auto& p : prompts) {
    p.resize(size_t(min_len + int32_t(rng() % uint64_t(max_len - min_len + 1))));
    for (int32_t& t : p) t = 1 + int32_t(rng() % uint64_t(vocab - 1));
  }
  return prompts;
}

// A greedy request.
inline RequestSpec greedy_spec(request_id id, std::vector<int32_t> prompt, int32_t max_tokens,
                               bool ignore_eos = false) {
  RequestSpec spec;
  spec.request.id = id;
  spec.request.prompt = std::move(prompt);
  spec.request.sampling.temperature = 0;
  spec.request.sampling.max_tokens = max_tokens;
  spec.request.sampling.ignore_eos = ignore_eos;
  return spec;
}

// Submits every prompt (greedy, max_tokens each), calls `submitted` (when
// given: a GatedRunner's open, say), and waits for all of them.
inline std::map<request_id, Outcome> run_greedy(Engine& engine,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                int32_t max_tokens, bool ignore_eos = false,
                                                const std::function<void()>& submitted = {}) {
  Collector collector;
  for (size_t i = 0; i < prompts.size(); ++i)
    engine.submit(greedy_spec(i + 1, prompts[i], max_tokens, ignore_eos), collector.callback_for(i + 1));
  if (submitted) submitted();
  collector.wait_for(prompts.size());
  return collector.outcomes();
}

}  // namespace conveyor::testing
