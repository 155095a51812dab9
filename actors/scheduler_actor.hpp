// The scheduler actor: one per engine. It owns the SchedulerCore (queues and
// per-sequence token state) and drives the iterations:
//
//   [admission policy] -> block manager -> [preemption policy -> block manager]*
//   -> executor -> tokens to the request actors -> next iteration
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
// Receives (actors/messages.hpp, scheduler_actor): submit, cancel, policy
// replacements, wake, stats. Sends: alloc, admit, preempt, swap, step, and
// TokenEvents to each request's sink. A sink that dies cancels its request.
#pragma once

#include <functional>

#include "actors/messages.hpp"
#include "engine/metrics.hpp"
#include "engine/scheduler_core.hpp"

namespace conveyor {

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
};

scheduler_actor spawn_scheduler(caf::actor_system& sys, SchedulerConfig config,
                                SchedulerActors actors);

}  // namespace conveyor
