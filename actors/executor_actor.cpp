#include "actors/executor_actor.hpp"

#include <chrono>

namespace conveyor {
namespace {

struct executor_state {
  executor_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  std::shared_ptr<StepRunner> runner;
  static inline const char* name = "executor";
};

executor_actor::behavior_type executor(executor_actor::stateful_pointer<executor_state> self,
                                       std::shared_ptr<StepRunner> runner) {
  self->state.runner = std::move(runner);
  return {
      [self](step_atom, StepPlan& plan) {
        auto& st = self->state;
        const auto start = std::chrono::steady_clock::now();
        StepResult result = st.runner->run(plan);
        result.started_ns = start.time_since_epoch().count();
        result.finished_ns = std::chrono::steady_clock::now().time_since_epoch().count();
        return result;
      },
  };
}

}  // namespace

executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<StepRunner> runner) {
  return sys.spawn<caf::detached>(executor, std::move(runner));
}

}  // namespace conveyor
