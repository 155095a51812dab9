#include "engine/swap_engine.hpp"

#include <future>

namespace conveyor {

void copy_and_wait(SwapEngine& engine, const SwapOrder& order) {
  std::promise<void> landed;
  std::future<void> wait = landed.get_future();
  engine.submit(order, [&landed](double) { landed.set_value(); });
  wait.wait();
}

}  // namespace conveyor
