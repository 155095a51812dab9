#include "actors/executor_actor.hpp"

#include <chrono>

namespace conveyor {
namespace {

executor_actor::behavior_type executor(executor_actor::pointer self,
                                       std::shared_ptr<StepRunner> runner) {
  (void)self;
  return {
      [runner](step_atom, const StepPlan& plan) {
        const auto start = std::chrono::steady_clock::now();
        StepResult result = runner->run(plan);
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
