#include "engine/step_runner.hpp"

#include <stdexcept>

namespace conveyor {

void StepRunner::launch(StepPlan&) { throw std::logic_error("StepRunner::launch: this runner is not pipelined"); }
StepResult StepRunner::finish() { throw std::logic_error("StepRunner::finish: this runner is not pipelined"); }

}  // namespace conveyor
