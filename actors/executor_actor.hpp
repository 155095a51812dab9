// The executor actor: owns a StepRunner (weights, samplers, each sequence's
// last sample, and the KV pool it shares with the swap actor) and runs one
// StepPlan per message; the runner fills the plan's placeholders. Spawn it
// detached so that a forward pass, which takes milliseconds, never blocks the
// scheduler's worker threads.
//
// Receives: (step, StepPlan)  Replies: StepResult, or an error (Errc::internal)
// when the runner threw: the scheduler then restarts the engine's workers.
#pragma once

#include <memory>

#include "actors/fault_injection.hpp"
#include "actors/messages.hpp"
#include "actors/step_runner.hpp"

namespace conveyor {

// `faults` (may be null) can make steps throw (tests).
executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<StepRunner> runner,
                              std::shared_ptr<FaultInjector> faults = nullptr);

}  // namespace conveyor
