// The swap actor: runs swap orders on its own thread (detached), so copies
// between device and host memory overlap the executor's forward pass. The
// scheduler hands a swapped sequence back to the executor only after the
// order's SwapDone arrived.
//
// Receives: (swap, SwapOrder)  Replies: SwapDone (with the copy's duration)
#pragma once

#include <memory>

#include "actors/messages.hpp"
#include "actors/swap_engine.hpp"

namespace conveyor {

swap_actor spawn_swap(caf::actor_system& sys, std::shared_ptr<SwapEngine> engine);

}  // namespace conveyor
