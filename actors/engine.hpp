// The engine, in-process: the actors of one model wired together, and the
// C++ API that the server, the examples and users' own actors use.
//
//   caf::actor_system_config cfg;  conveyor::add_engine_types(cfg);
//   caf::actor_system sys{cfg};
//   auto engine = conveyor::Engine::create(sys, EngineConfig{}, std::move(model));
//   auto handle = (*engine)->submit(spec, [](const StreamEvent& e) { ... });
//   handle.cancel();
//
// submit() never blocks: events arrive on an actor thread, in order, the last
// with finish != none (an error such as a full queue is such a last event,
// with its Errc). A request with spec.request.n > 1 streams n samples, told
// apart by StreamEvent::index, each ending with its own last event. Engine
// methods are thread-safe. Destroying the Engine stops its actors; requests
// still in flight end with an error event.
//
// A fault inside the engine (the runner throws, a swap copy or a KV
// allocation fails) does not end it: the scheduler restarts its workers with
// a fresh KV pool and recomputes the running requests from their tokens so
// far (EngineConfig::fault_recovery; see actors/scheduler_actor.hpp). A
// request given up on ends with Errc::internal ("the engine failed: ...").
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/embedder.hpp"
#include "engine/engine_config.hpp"
#include "engine/grammar_binder.hpp"
#include "engine/kv_capacity.hpp"
#include "actors/messages.hpp"
#include "actors/stream_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "engine/step_runner.hpp"
#include "engine/swap_engine.hpp"
#include "model/formats/loader.hpp"

namespace conveyor {

class RequestHandle {
 public:
  RequestHandle() = default;
  RequestHandle(request_id id, stream_actor stream) : id_(id), stream_(std::move(stream)) {}
  request_id id() const { return id_; }
  // Cancels the request; its last event says `cancelled` (unless it already ended).
  void cancel() const;

 private:
  request_id id_ = 0;
  stream_actor stream_;  // the stream actor serving it (actors/stream_actor.hpp)
};

// What the scheduler needs to know of a model besides its runner.
struct ModelInfo {
  ModelConfig config;
  std::vector<int32_t> eos_ids;
  std::shared_ptr<const Tokenizer> tokenizer;  // may be null
  uint64_t weights_fingerprint = 0;            // model/weights.hpp's; 0: unknown (a fake runner's)
};

class Engine {
 public:
  // Loads `model` into the backend config.device names (backends/backend.hpp:
  // the CPU, or an error for a device this build or machine cannot use),
  // with a KV cache of config.kv_cache_dtype sized by config.kv_cache_tokens,
  // kv_cache_memory or the memory available after the weights are loaded
  // (engine/kv_capacity.hpp).
  static Expected<std::unique_ptr<Engine>> create(caf::actor_system& sys, const EngineConfig& config,
                                                  LoadedModel model);
  // With any runner and swap engine (fakes in tests). A null swap engine
  // means no swap space: swap preemption falls back to recompute. The runner
  // owns its KV memory, so config.kv_cache_tokens must give the capacity.
  static Expected<std::unique_ptr<Engine>> create(caf::actor_system& sys, const EngineConfig& config,
                                                  ModelInfo info, std::shared_ptr<StepRunner> runner,
                                                  std::shared_ptr<SwapEngine> swap);
  // An engine whose scheduler is another actor with the scheduler's
  // interface, such as a router over engines on other machines
  // (router/router_actor.hpp): submit() runs its stream actors here, against it.
  // `num_blocks` is what /metrics and the server report. Destroying the
  // Engine stops that actor.
  static std::unique_ptr<Engine> over(caf::actor_system& sys, const EngineConfig& config, ModelInfo info,
                                      scheduler_actor scheduler, int32_t num_blocks);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  RequestHandle submit(RequestSpec spec, EventCallback on_event);
  // An id from the engine's automatic range, unused so far (for a request
  // that reaches the scheduler without submit(): an engine node's).
  request_id next_request_id() { return kFirstAutomaticRequestId + next_id_++; }
  // The same, delivering each StreamEvent as a message to `sink` (an actor of
  // the caller's; its behavior handles `const StreamEvent&`). A sink that
  // stops cancels its requests; a null one is an empty callback (the request
  // is cancelled at its first event, with a warning).
  RequestHandle submit(RequestSpec spec, caf::actor sink);

  // Lets go of the KV blocks a session keeps (GenerateRequest::session).
  void release_session(const std::string& name);

  // Replaces a policy while the engine runs; nothing in flight is dropped.
  // By name: a new actor of a registered policy (actors/policy_registry.hpp).
  // By handle: any actor of the protocol (actors/policy_actors.hpp), which
  // from now on belongs to the engine: it is stopped when the engine stops,
  // or when it fails (dies, errs, or answers later than
  // EngineConfig::policy_timeout_seconds) and the built-in of the configured
  // mode replaces it, with a warning in the log. Errors: an unknown name, a
  // null handle. Takes effect at the scheduler's next question.
  Status set_admission_policy(const std::string& name);
  Status set_preemption_policy(const std::string& name);
  Status set_admission_policy(admission_actor policy);
  Status set_preemption_policy(preemption_actor policy);

  // Blocks for the answer (for tools and tests, not for actor threads).
  Expected<EngineStats> stats();

  const ModelInfo& model() const { return info_; }
  // Compiles grammars against the model's vocabulary: submit() binds a
  // request's grammar that came as IR only (engine/grammar_binder.hpp).
  const std::shared_ptr<GrammarBinder>& grammar_binder() const { return grammar_binder_; }
  // The config; after create() with a model, as resolved: kv_cache_tokens is
  // the capacity chosen, kv_cache_dtype the type chosen (not "auto"),
  // kv_cache_memory 0.
  const EngineConfig& config() const { return config_; }
  // The KV cache's capacity, bytes (0 with a runner of the caller's) and origin.
  const KvCapacity& kv_capacity() const { return kv_capacity_; }
  // How the weights are held, for start-up lines: "74.4 MiB as Q6_K, Q4_K
  // (avx512-vnni products)"; "" with a runner of the caller's.
  const std::string& weights_description() const { return weights_description_; }
  // The backend's embeddings (engine/embedder.hpp); null where it has none
  // (the CUDA backend, a runner of the caller's).
  const std::shared_ptr<Embedder>& embedder() const { return embedder_; }
  const scheduler_actor& scheduler() const { return scheduler_; }
  // Latency histograms and finish counters (for /metrics).
  const EngineMetrics& metrics() const { return *metrics_; }
  // Called on an actor thread after each restart, with what failed (the
  // server logs it).
  void on_restart(std::function<void(const std::string& fault)> listener) {
    metrics_->on_restart(std::move(listener));
  }
  int32_t num_blocks() const { return num_blocks_; }
  caf::actor_system& system() { return sys_; }

 private:
  Engine(caf::actor_system& sys, EngineConfig config, ModelInfo info);
  // Sets the scheduler and spawns the stream actors that submit to it.
  void set_scheduler(scheduler_actor scheduler);
  // Both submit()s: `sink`, where set, is the actor `on_event` sends to.
  RequestHandle submit(RequestSpec spec, EventCallback on_event, caf::actor sink);

  caf::actor_system& sys_;
  EngineConfig config_;
  ModelInfo info_;
  int32_t num_blocks_ = 0;
  KvCapacity kv_capacity_;
  std::string weights_description_;
  std::shared_ptr<Embedder> embedder_;
  std::shared_ptr<GrammarBinder> grammar_binder_;
  std::shared_ptr<EngineMetrics> metrics_;
  scheduler_actor scheduler_;
  std::vector<stream_actor> streams_;  // submit() spreads requests over them
  std::atomic<size_t> next_stream_{0};
  std::atomic<request_id> next_id_{1};
};

}  // namespace conveyor
