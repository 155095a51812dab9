// The swap actor: hands swap orders to a SwapEngine and answers each with
// SwapDone when the engine reports its copies landed. It does not wait for
// one order before submitting the next, so orders overlap as far as the
// engine allows. It runs detached (a thread of its own): an engine that
// copies synchronously (the CPU one) copies on that thread, beside the
// executor's forward pass. The scheduler hands a swapped sequence back to
// the executor only after the order's SwapDone arrived.
//
// Receives: (swap, SwapOrder)         Replies: SwapDone (with the copy's duration)
//           (landed, ticket, seconds) from the engine's completion callback
#pragma once

#include <memory>

#include "engine/fault_injection.hpp"
#include "actors/messages.hpp"
#include "engine/swap_engine.hpp"

namespace conveyor {

// A null engine (no swap space) answers every order at once.
// `faults` (may be null) can make swap orders fail (tests).
swap_actor spawn_swap(caf::actor_system& sys, std::shared_ptr<SwapEngine> engine,
                      std::shared_ptr<FaultInjector> faults = nullptr);

}  // namespace conveyor
