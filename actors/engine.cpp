#include "actors/engine.hpp"

#include <algorithm>

#include "backends/backend.hpp"
#include "actors/block_manager_actor.hpp"
#include "actors/executor_actor.hpp"
#include "engine/fault_injection.hpp"
#include "engine/kv_capacity.hpp"
#include "actors/policy_actors.hpp"
#include "actors/policy_registry.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/swap_actor.hpp"
#include "engine/swap_engine.hpp"

namespace conveyor {

void RequestHandle::cancel() const {
  if (stream_) caf::anon_send(stream_, cancel_atom_v, id_);
}

Engine::Engine(caf::actor_system& sys, EngineConfig config, ModelInfo info)
    : sys_(sys),
      config_(std::move(config)),
      info_(std::move(info)),
      grammar_binder_(std::make_shared<GrammarBinder>(info_.tokenizer, info_.eos_ids)) {}

Expected<std::unique_ptr<Engine>> Engine::create(caf::actor_system& sys, const EngineConfig& config,
                                                 LoadedModel model) {
  if (Status s = validate(config); !s) return s.error();
  if (Status s = check_device(config.device); !s) return s.error();
  ModelInfo info{model.config, model.eos_ids, model.tokenizer, weights_fingerprint(model.weights)};
  auto backend = backend_factory(config.device)(config, std::move(model));
  if (!backend) return backend.error();
  EngineConfig resolved = config;
  resolved.kv_cache_tokens = backend->capacity.tokens;
  resolved.kv_cache_memory = 0;
  resolved.kv_cache_dtype = backend->kv_dtype;
  auto engine = create(sys, resolved, std::move(info), std::move(backend->runner), std::move(backend->swap));
  if (engine) {
    (*engine)->kv_capacity_ = std::move(backend->capacity);
    (*engine)->weights_description_ = std::move(backend->weights_description);
    (*engine)->embedder_ = std::move(backend->embedder);
  }
  return engine;
}

Expected<std::unique_ptr<Engine>> Engine::create(caf::actor_system& sys, const EngineConfig& config,
                                                 ModelInfo info, std::shared_ptr<StepRunner> runner,
                                                 std::shared_ptr<SwapEngine> swap) {
  if (Status s = validate(config); !s) return s.error();
  if (config.kv_cache_tokens == 0)
    return make_error(Errc::invalid_argument,
                      "--kv-cache-tokens: an engine on its own runner needs its capacity in tokens");
  if (config.speculative.enabled() && !runner->verifies_drafts())
    return make_error(Errc::invalid_argument, "--speculative: this backend's runner verifies no drafts");
  if (config.speculative.enabled() && config.speculative.method == SpeculativeMethod::draft &&
      !runner->drafts_with_model())
    return make_error(Errc::invalid_argument, "--speculative draft: this backend's runner has no draft model");
  auto admission = configured_admission_actor(sys, config);
  if (!admission) return admission.error();
  auto preemption = configured_preemption_actor(sys, config);
  if (!preemption) {
    caf::anon_send_exit(*admission, caf::exit_reason::user_shutdown);
    return preemption.error();
  }

  std::unique_ptr<Engine> engine(new Engine(sys, config, std::move(info)));
  const ModelConfig& mc = engine->info_.config;
  engine->num_blocks_ = int32_t(config.kv_cache_tokens / config.block_size);
  engine->kv_capacity_ = KvCapacity{int64_t(engine->num_blocks_) * config.block_size, 0, "--kv-cache-tokens"};
  const int32_t host_blocks = swap ? int32_t(config.swap_space_tokens / config.block_size) : 0;

  SchedulerConfig sc;
  sc.block_size = config.block_size;
  sc.num_blocks = engine->num_blocks_;
  sc.num_host_blocks = host_blocks;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_batched_tokens = config.max_batched_tokens;
  sc.prefill_chunk = config.prefill_chunk;
  sc.target_itl_seconds = config.target_itl_ms / 1e3;
  sc.max_waiting = config.max_waiting;
  sc.context_length = mc.context_length;
  sc.vocab_size = mc.vocab_size;
  sc.eos_ids = engine->info_.eos_ids;
  sc.batching = config.batching;
  sc.scheduling_policy = config.scheduling_policy;
  sc.overlap = config.overlap;
  sc.speculative = config.speculative;
  sc.speculative.jump_forward = config.speculative.jump_forward && runner->verifies_drafts();
  sc.aging_interval_seconds = config.aging_interval_seconds;
  sc.recompute_after_fault = config.fault_recovery == FaultRecovery::recompute;
  sc.prefix_wait = config.prefix_caching && config.prefix_wait;
  sc.session_ttl_seconds = config.session_ttl_seconds;
  // Kept blocks are only worth keeping when the prefix cache can find them.
  sc.session_max_blocks = config.prefix_caching ? int32_t(engine->num_blocks_ * config.session_max_share) : 0;
  sc.max_fault_retries = config.max_fault_retries;
  sc.prompt_logprobs = runner->scores_prompts();

  SchedulerActors a;
  engine->metrics_ = a.metrics = std::make_shared<EngineMetrics>();
  // The workers a restart replaces. The runner and the swap engine (the
  // weights, the KV memory) outlive them; the runner forgets its sequences.
  const BlockManagerOptions bm{engine->num_blocks_, config.block_size, host_blocks, config.prefix_caching};
  std::shared_ptr<FaultInjector> faults = config.fault_injection.empty()
                                              ? nullptr
                                              : *FaultInjector::parse(config.fault_injection);
  // A runner that cannot run again after the reset (a lost CUDA context)
  // gets no more restarts: the workers are spawned once more, the next step
  // fails with the runner's reason, and the scheduler, finding no
  // respawn_workers, ends every request with it and stops (instead of
  // restarting into the same failure). The workers live in a shared object
  // because clearing w.respawn_workers destroys the closure that runs.
  struct Workers {
    caf::actor_system& sys;
    BlockManagerOptions bm;
    std::shared_ptr<StepRunner> runner;
    std::shared_ptr<SwapEngine> swap;
    std::shared_ptr<FaultInjector> faults;
  };
  auto workers = std::make_shared<Workers>(Workers{sys, bm, std::move(runner), std::move(swap), faults});
  a.respawn_workers = [workers](SchedulerActors& w) {
    const std::shared_ptr<Workers> keep = workers;  // outlives the closure
    keep->runner->reset();
    if (!keep->runner->usable()) w.respawn_workers = nullptr;
    w.block_manager = spawn_block_manager(keep->sys, keep->bm, keep->faults);
    w.executor = spawn_executor(keep->sys, keep->runner, keep->faults);
    w.swap = spawn_swap(keep->sys, keep->swap, keep->faults);
  };
  a.respawn_workers(a);
  a.admission = std::move(admission).value();
  a.preemption = std::move(preemption).value();
  // A policy that fails is replaced by the built-in of the configured mode.
  a.fallback.timeout = std::chrono::microseconds(int64_t(config.policy_timeout_seconds * 1e6));
  a.fallback.admission = [&sys, mode = config.admission, ac = config.admission_config] {
    return spawn_admission_policy(sys, make_admission_policy(mode, ac));
  };
  a.fallback.preemption = [&sys, mode = config.preemption] {
    return spawn_preemption_policy(sys, PreemptionPolicy(mode));
  };
  a.fallback.admission_name = to_string(config.admission);
  a.fallback.preemption_name = to_string(config.preemption);
  engine->set_scheduler(spawn_scheduler(sys, std::move(sc), std::move(a)));
  return engine;
}

std::unique_ptr<Engine> Engine::over(caf::actor_system& sys, const EngineConfig& config, ModelInfo info,
                                     scheduler_actor scheduler, int32_t num_blocks) {
  std::unique_ptr<Engine> engine(new Engine(sys, config, std::move(info)));
  engine->num_blocks_ = num_blocks;
  engine->kv_capacity_ = KvCapacity{int64_t(num_blocks) * config.block_size, 0, "the nodes'"};
  engine->metrics_ = std::make_shared<EngineMetrics>();
  engine->set_scheduler(std::move(scheduler));
  return engine;
}

// The scheduler stops its workers and policies when it stops; the stream
// actors end every open request when it does, then stop.
Engine::~Engine() {
  caf::anon_send_exit(scheduler_, caf::exit_reason::user_shutdown);
  for (const stream_actor& stream : streams_) caf::anon_send(stream, drain_atom_v);
}

void Engine::set_scheduler(scheduler_actor scheduler) {
  scheduler_ = std::move(scheduler);
  // As many stream actors as CAF workers (at most four): each costs the
  // scheduler a message per iteration, and they detokenize in parallel where
  // there are cores for them. Each is detached (actors/stream_actor.cpp says
  // why).
  const size_t n = std::clamp<size_t>(sys_.scheduler().num_workers(), 1, 4);
  for (size_t i = 0; i < n; ++i) streams_.push_back(spawn_stream(sys_, scheduler_));
}

RequestHandle Engine::submit(RequestSpec spec, EventCallback on_event) {
  return submit(std::move(spec), std::move(on_event), caf::actor{});
}

RequestHandle Engine::submit(RequestSpec spec, caf::actor sink) {
  if (!sink) return submit(std::move(spec), EventCallback{});  // nobody to tell: as an empty callback
  EventCallback forward = [sink](const StreamEvent& e) { caf::anon_send(sink, e); };
  return submit(std::move(spec), std::move(forward), std::move(sink));
}

RequestHandle Engine::submit(RequestSpec spec, EventCallback on_event, caf::actor sink) {
  if (spec.request.id == 0) {  // from a range of its own: caller-chosen ids are below it
    spec.request.id = next_request_id();
    spec.request.automatic_id = true;
  }
  if (!spec.tokenizer) spec.tokenizer = info_.tokenizer;
  spec.metrics = metrics_;
  // A grammar that failed to bind stays IR only, and the scheduler refuses it
  // (validate(SamplingParams)), so the request ends with that error.
  (void)grammar_binder_->bind(spec.request.sampling.grammar);
  const request_id id = spec.request.id;
  const stream_actor& stream = streams_[next_stream_++ % streams_.size()];
  caf::anon_send(stream, open_atom_v, StreamOpen{std::move(spec), std::move(on_event), std::move(sink)});
  return RequestHandle(id, stream);
}

void Engine::release_session(const std::string& name) { caf::anon_send(scheduler_, session_atom_v, name); }

Status Engine::set_admission_policy(const std::string& name) {
  auto policy = make_admission_actor(name, sys_, config_);
  if (!policy) return policy.error();
  return set_admission_policy(std::move(policy).value());
}

Status Engine::set_preemption_policy(const std::string& name) {
  auto policy = make_preemption_actor(name, sys_, config_);
  if (!policy) return policy.error();
  return set_preemption_policy(std::move(policy).value());
}

Status Engine::set_admission_policy(admission_actor policy) {
  if (!policy) return make_error(Errc::invalid_argument, "set_admission_policy: no actor");
  caf::anon_send(scheduler_, policy_atom_v, std::move(policy));
  return Status::ok();
}

Status Engine::set_preemption_policy(preemption_actor policy) {
  if (!policy) return make_error(Errc::invalid_argument, "set_preemption_policy: no actor");
  caf::anon_send(scheduler_, policy_atom_v, std::move(policy));
  return Status::ok();
}

Expected<EngineStats> Engine::stats() {
  caf::scoped_actor self{sys_};
  Expected<EngineStats> out = make_error(Errc::io_error, "no answer from the scheduler");
  self->request(scheduler_, caf::infinite, stats_atom_v)
      .receive([&](const EngineStats& s) { out = s; },
               [&](caf::error& err) { out = from_caf_error(err); });
  return out;
}

}  // namespace conveyor
