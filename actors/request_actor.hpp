// The request actor: one per request. It submits the request to the
// scheduler, turns the scheduler's token events into text for its client
// (incremental detokenization, so a character split across tokens is never
// broken; stop strings, held back while they may still match), and forwards
// a client's cancel. It ends after the request's last event.
//
// Receives: TokenEvent (from the scheduler), cancel (from the client).
// Calls the client's callback with StreamEvents, on this actor's thread, in
// order; the last one has finish != none.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "engine/metrics.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor {

using EventCallback = std::function<void(const StreamEvent&)>;

struct RequestSpec {
  GenerateRequest request;
  std::vector<std::string> stop;                // stop strings (not included in the text)
  std::shared_ptr<const Tokenizer> tokenizer;   // null: token ids only, no text
  std::shared_ptr<EngineMetrics> metrics;       // null: not measured
};

request_actor spawn_request(caf::actor_system& sys, scheduler_actor scheduler, RequestSpec spec,
                            EventCallback on_event);

// Stop-string matching over streamed text, without actors (tests use it).
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Appends text; returns what can be released now. Sets stopped() when a
  // stop string appeared (the returned text ends just before it).
  std::string push(const std::string& text);
  // What is still held back (at the end of a request that did not stop).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace conveyor
