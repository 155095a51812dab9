// The stream actor: the client side of requests. Engine::submit hands each
// request to one of the engine's few stream actors (as many as CAF workers,
// at most four; each detached, a thread of its own), which submits it to the
// scheduler with itself as the sink, turns the scheduler's token events into
// text for the request's client (incremental detokenization, so a character
// split across tokens is never broken; stop strings, held back while they may
// still match), and forwards the client's cancel after the request's own
// submit, so it can never overtake it. The scheduler sends each stream actor
// one TokenBatch per iteration for all of its requests: streaming costs a
// message per sink and iteration, not per request
// (docs/benchmarks/history.md, 2026-12-03).
//
// Receives: open (a request and its callback), TokenBatch (from the
// scheduler), cancel (from the client), drain (from ~Engine: stop once the
// scheduler has). Calls each request's callback with StreamEvents, on this
// actor's thread, in order; the last one has finish != none. A callback that
// throws ends its own request (cancelled at the scheduler), no other. When
// the scheduler stops, every open request ends with an error event, and so
// does every request opened after (a dead engine still answers); the actor
// stops when the scheduler has stopped and the engine is gone. It holds a
// handle to itself until then, so that dropping every handle to it (an
// Engine destroyed, its RequestHandles dropped) cannot end it first.
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
  // Control tokens the text shows as their pieces, where decoding drops
  // them otherwise (Mistral's [TOOL_CALLS], so that the call parser sees
  // where calls begin).
  std::vector<int32_t> shown_tokens;
  std::shared_ptr<EngineMetrics> metrics;       // null: not measured
};

// A request for a stream actor: spec.request.id must be set (Engine::submit
// sets it). Local only (it holds a callback), never sent across the network.
struct StreamOpen {
  RequestSpec spec;
  EventCallback on_event;
  // Engine::submit(spec, actor): the actor on_event sends to. Watched: when
  // it stops, its requests are cancelled (nobody is left to read them).
  caf::actor sink;
};

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::StreamOpen)

namespace conveyor {

using stream_actor = token_sink_actor::extend<caf::reacts_to<open_atom, StreamOpen>,
                                              caf::reacts_to<cancel_atom, request_id>,
                                              caf::reacts_to<drain_atom>>;

stream_actor spawn_stream(caf::actor_system& sys, scheduler_actor scheduler);

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
