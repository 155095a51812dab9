// The executor actor: owns a StepRunner (weights, samplers, each sequence's
// last sample, and the KV pool it shares with the swap actor) and runs one
// StepPlan per message; the runner fills the plan's placeholders. Spawn it
// detached so that a forward pass, which takes milliseconds, never blocks the
// scheduler's worker threads.
//
// Receives: (step, StepPlan)  Replies: StepResult
#pragma once

#include <memory>

#include "actors/messages.hpp"
#include "actors/step_runner.hpp"

namespace conveyor {

executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<StepRunner> runner);

}  // namespace conveyor
