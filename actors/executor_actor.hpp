// The executor actor: owns a StepRunner (weights, samplers, each sequence's
// last sample, and the KV pool it shares with the swap actor) and runs one
// StepPlan per message; the runner fills the plan's placeholders. Spawn it
// detached so that a forward pass, which takes milliseconds, never blocks the
// scheduler's worker threads.
//
// Receives: (step, StepPlan)  Replies: StepResult, or an error (Errc::internal)
// when the runner threw: the scheduler then restarts the engine's workers.
//
// With a pipelined runner (StepRunner::pipelined, the CUDA runner) a step is
// launched when its plan arrives, and the step before it finishes only
// then: the scheduler plans a step ahead, so the device has the next step
// queued while the host brings back, and the scheduler applies, the
// previous one's samples. The newest step finishes when the executor,
// polling it through its own mailbox between messages, finds it done, so a
// scheduler that waits for it before planning more is never kept waiting.
// Replies still go out in step order, each once its step's device work is
// done. Such an executor holds itself (its runner's ready callback does)
// until an exit message stops it, so that it and its runner end on its own
// thread, never on CUDA's callback thread: its owner (the scheduler) stops it.
#pragma once

#include <memory>

#include "engine/fault_injection.hpp"
#include "actors/messages.hpp"
#include "engine/step_runner.hpp"

namespace conveyor {

// `faults` (may be null) can make steps throw (tests).
executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<StepRunner> runner,
                              std::shared_ptr<FaultInjector> faults = nullptr);

}  // namespace conveyor
