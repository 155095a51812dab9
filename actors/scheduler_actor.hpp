// The scheduler actor: one per engine. It owns the SchedulerCore (queues and
// per-sequence token state) and drives the iterations:
//
//   [admission policy] -> block manager -> [preemption policy -> block manager]*
//   -> executor -> tokens to the stream actors -> next iteration
//
// With overlap (the default) it builds iteration k+1 as soon as it has sent
// k, so the executor finds k+1 waiting when k ends; the result of k arrives
// while k+1 runs and is applied before k+2 is built (see scheduler_core.hpp
// for what a plan built ahead may and may not do). A result that arrives
// while a plan is being built waits until that plan is out.
//
// A finished sequence's blocks go back in the next iteration's allocation
// batch, before anything is allocated, so its slot is refilled at once.
// Swap orders go to the swap actor as they arise; their completions re-enter
// the scheduler as messages and the sequences rejoin at the next iteration.
//
// Supervision: the scheduler owns the engine's workers (block manager,
// executor, swap actor) and restarts them when one fails. A failure is an
// error reply to any request it sent them (the executor's runner threw, a
// swap copy or an allocation failed, a worker died); from then on it sends
// nothing, drops the replies still owed, and once the last is in it stops
// the old workers, spawns fresh ones (respawn_workers: a fresh KV pool; the
// runner is reset, the weights stay) and lets the core recover
// (SchedulerCore::recover_from_fault: recompute, or an error that says the
// engine failed). Without respawn_workers every request ends with an error
// and the scheduler stops. EngineMetrics counts restarts and says while one
// is under way. When the scheduler stops, its workers stop with it.
//
// Policies: the scheduler monitors its admission and preemption actors and
// asks them with a time limit; one that fails is replaced by its built-in
// fallback (PolicyFallback), logged, and the question asked again, so no
// request is lost and no worker restarts for it.
//
// Receives (actors/messages.hpp, scheduler_actor): submit, cancel, policy
// replacements, wake, stats. Sends: alloc, admit, preempt, swap, step, and
// one TokenBatch per sink and iteration (actors/token_outbox.hpp). A sink
// that dies cancels its requests.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "actors/messages.hpp"
#include "engine/metrics.hpp"
#include "engine/scheduler_core.hpp"

namespace conveyor {

// What stands in for a policy actor that fails the scheduler (it dies,
// answers with an error, or does not answer within `timeout`): the built-in
// of the configured mode, spawned on demand (actors/policy_actors.hpp says
// what the scheduler then does). Null functions: such a failure is a fault,
// as a worker's is.
struct PolicyFallback {
  std::chrono::microseconds timeout{100'000};
  std::function<admission_actor()> admission;
  std::function<preemption_actor()> preemption;
  std::string admission_name, preemption_name;  // the built-ins', for the log
};

struct SchedulerActors {
  block_manager_actor block_manager;
  executor_actor executor;
  swap_actor swap;
  admission_actor admission;
  preemption_actor preemption;
  std::shared_ptr<EngineMetrics> metrics;  // may be null
  // Replaces block_manager, executor and swap with fresh actors (null: no
  // restarts). Engine::create spawns the first ones with it too.
  std::function<void(SchedulerActors&)> respawn_workers;
  PolicyFallback fallback;
};

scheduler_actor spawn_scheduler(caf::actor_system& sys, SchedulerConfig config,
                                SchedulerActors actors);

}  // namespace conveyor
