#include "actors/executor_actor.hpp"

namespace conveyor {
namespace {

executor_actor::behavior_type executor(executor_actor::pointer self,
                                       std::shared_ptr<StepRunner> runner) {
  (void)self;
  return {
      [runner](step_atom, const StepPlan& plan) { return runner->run(plan); },
  };
}

}  // namespace

executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<StepRunner> runner) {
  return sys.spawn<caf::detached>(executor, std::move(runner));
}

}  // namespace conveyor
