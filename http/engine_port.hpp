// The server's one door into the engine's actors, in a header without CAF so
// that the network code (Beast) and the actor code compile apart.
//
// Nothing here blocks: submit() spawns the request's actor and returns;
// events arrive on actor threads (the caller posts them onward). stats_async()
// asks the scheduler through a helper actor that this port owns and calls
// back on an actor thread: Engine::stats() would block an I/O thread for a
// round trip (35-120 us, longer while an iteration runs), so /metrics never
// calls it.
//
// Thread-safety: every method may be called from any thread. The Engine must
// outlive the port.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/embedder.hpp"
#include "engine/grammar_binder.hpp"
#include "engine/engine_config.hpp"
#include "engine/engine_types.hpp"
#include "engine/metrics.hpp"
#include "engine/stream_event.hpp"
#include "model/config.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor {
class Engine;
}

namespace conveyor::http {

using EventSink = std::function<void(const StreamEvent&)>;
// Cancels one submitted request (any thread, any number of times).
using CancelFn = std::function<void()>;

class EnginePort {
 public:
  explicit EnginePort(Engine& engine);
  ~EnginePort();
  EnginePort(const EnginePort&) = delete;
  EnginePort& operator=(const EnginePort&) = delete;

  // `shown_tokens`: RequestSpec::shown_tokens.
  CancelFn submit(GenerateRequest request, std::vector<std::string> stop, std::vector<int32_t> shown_tokens,
                  EventSink sink);
  void release_session(const std::string& name);
  void stats_async(std::function<void(Expected<EngineStats>)> done);
  // Whether the backend computes embeddings (engine/embedder.hpp; the CPU and
  // CUDA backends do; a router's engine does not).
  bool can_embed() const;
  // Embeds `inputs` on the port's embedding thread (http/work_queue.hpp)
  // and calls `done` there. Only when can_embed(). The CancelFn drops the job
  // if it has not started.
  CancelFn embed_async(std::vector<std::vector<int32_t>> inputs, Pooling pooling,
                       std::function<void(Expected<std::vector<std::vector<float>>>)> done);

  const EngineMetrics& metrics() const;
  // More /metrics text after the engine's (a router's; set before serving).
  void set_extra_metrics(std::function<std::string()> render);
  std::string extra_metrics() const;
  // Whether the engine can take requests now, for /health: a router's when
  // some node is up (set before serving; unset: always).
  void set_ready(std::function<bool()> ready);
  bool ready() const;
  const ModelConfig& model_config() const;
  std::shared_ptr<const Tokenizer> tokenizer() const;
  // The engine's grammar binder (all the model's end tokens; one vocabulary index).
  std::shared_ptr<GrammarBinder> grammar_binder() const;
  const EngineConfig& engine_config() const;
  int32_t num_blocks() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor::http
