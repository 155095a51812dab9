#include "actors/swap_actor.hpp"

#include <chrono>

namespace conveyor {
namespace {

swap_actor::behavior_type swapper(swap_actor::pointer self, std::shared_ptr<SwapEngine> engine) {
  (void)self;
  return {
      [engine](swap_atom, const SwapOrder& order) {
        const auto start = std::chrono::steady_clock::now();
        if (engine) engine->copy(order);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return SwapDone{order.seq, order.direction, seconds};
      },
  };
}

}  // namespace

swap_actor spawn_swap(caf::actor_system& sys, std::shared_ptr<SwapEngine> engine) {
  return sys.spawn<caf::detached>(swapper, std::move(engine));
}

}  // namespace conveyor
