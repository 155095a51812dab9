#include "actors/executor_actor.hpp"

#include <chrono>
#include <stdexcept>

namespace conveyor {
namespace {

struct executor_state {
  executor_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  std::shared_ptr<StepRunner> runner;
  std::shared_ptr<FaultInjector> faults;
  static inline const char* name = "executor";
};

executor_actor::behavior_type executor(executor_actor::stateful_pointer<executor_state> self,
                                       std::shared_ptr<StepRunner> runner,
                                       std::shared_ptr<FaultInjector> faults) {
  self->state.runner = std::move(runner);
  self->state.faults = std::move(faults);
  return {
      [self](step_atom, StepPlan& plan) -> caf::result<StepResult> {
        auto& st = self->state;
        const auto start = std::chrono::steady_clock::now();
        try {
          if (st.faults && st.faults->hit(FaultPoint::executor))
            throw std::runtime_error(describe_fault(FaultPoint::executor, st.faults->count(FaultPoint::executor)));
          StepResult result = st.runner->run(plan);
          result.started_ns = start.time_since_epoch().count();
          result.finished_ns = std::chrono::steady_clock::now().time_since_epoch().count();
          return result;
        } catch (const std::exception& e) {  // std::bad_alloc included
          return make_engine_error(Error{Errc::internal, std::string("executor: ") + e.what()});
        }
      },
  };
}

}  // namespace

executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<StepRunner> runner,
                              std::shared_ptr<FaultInjector> faults) {
  return sys.spawn<caf::detached>(executor, std::move(runner), std::move(faults));
}

}  // namespace conveyor
