#include "engine/swap_engine.hpp"

#include <future>
#include <stdexcept>
#include <string>

namespace conveyor {

void copy_and_wait(SwapEngine& engine, const SwapOrder& order) {
  std::promise<std::string> landed;  // "" or why the copies failed
  std::future<std::string> wait = landed.get_future();
  engine.submit(order, [&landed](Expected<double> r) { landed.set_value(r ? "" : r.error().message); });
  if (const std::string why = wait.get(); !why.empty()) throw std::runtime_error("swap copy: " + why);
}

}  // namespace conveyor
