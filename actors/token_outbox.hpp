// Token events on their way to sinks, grouped so that each sink gets one
// TokenBatch per flush, its events in the order they were added. The
// scheduler flushes once per iteration and the router once per batch it
// forwards, so a sink serving many requests costs one message an iteration.
#pragma once

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/messages.hpp"

namespace conveyor {

class TokenOutbox {
 public:
  void add(const token_sink_actor& sink, TokenEvent event) {
    // Runs of events mostly share a sink (an engine has a few stream actors).
    if (last_ >= batches_.size() || batches_[last_].first != sink) {
      auto [it, fresh] = index_.try_emplace(sink.address(), batches_.size());
      if (fresh) {
        batches_.emplace_back(sink, TokenBatch{});
        // As many as the last flush's largest batch: a batch grows once, not log2(n) times.
        batches_.back().second.events.reserve(largest_);
      }
      last_ = it->second;
    }
    batches_[last_].second.events.push_back(std::move(event));
  }

  // Sends each sink its batch, from `self`, and empties the outbox.
  template <class Self>
  void flush(Self* self) {
    largest_ = 0;
    for (auto& [sink, batch] : batches_) {
      largest_ = std::max(largest_, batch.events.size());
      self->send(sink, std::move(batch));
    }
    batches_.clear();
    index_.clear();
  }

 private:
  std::vector<std::pair<token_sink_actor, TokenBatch>> batches_;
  std::unordered_map<caf::actor_addr, size_t> index_;
  size_t last_ = 0;  // the batch the last event went to
  size_t largest_ = 0;  // events in the last flush's largest batch
};

}  // namespace conveyor
