// Copies KV blocks between the device pool and host swap space.
//
// An order is submitted and completes later: submit() starts its copies and
// returns, and the engine calls the order's `done` once every block has
// landed. Several orders may be in flight at once and may complete in any
// order, so an engine with copy hardware of its own can overlap copies with
// each other and with the forward pass. The swap actor (swap_actor.hpp)
// submits each order as it arrives and answers the scheduler when `done`
// runs.
//
// Two are built. CpuSwapEngine (backends/cpu/cpu_swap_engine.hpp) copies on
// the calling thread (one memcpy per block: a block is contiguous across
// layers, model/kv_cache.hpp) and calls `done` before submit() returns; the
// swap actor's own thread is what overlaps those copies with the forward
// pass. CudaSwapEngine (backends/cuda/cuda_runner.hpp) enqueues
// cudaMemcpyAsync between the device pool and a pinned host pool on a copy
// stream per direction and returns; a waiter thread calls `done` once the
// order's end event has fired, with the time the events measured, or with
// the stream's error when the copies failed. The
// compute stream never waits for a copy: a swapped-in sequence is planned
// only after its order is reported done.
//
// Safety: the scheduler only orders copies of blocks that no step plan
// touches until the order's completion has been reported.
#pragma once

#include <functional>
#include <memory>

#include "base/status.hpp"
#include "engine/engine_types.hpp"

namespace conveyor {

class SwapEngine {
 public:
  // Called once per order, with the seconds its copies took (for the cost
  // policy: copy time, not time spent queued behind other orders), or with
  // an error when they failed after submit() returned (a copy that cannot
  // be queued throws from submit() instead). The swap actor reports either
  // failure to the scheduler, which restarts the engine's workers. It may
  // run on any thread, before submit() returns or after; it must not block.
  using Done = std::function<void(Expected<double> seconds)>;

  virtual ~SwapEngine() = default;
  // Starts copying the order's blocks; `done` says when they have landed.
  virtual void submit(const SwapOrder& order, Done done) = 0;
};

// Submits `order` and waits for it (tests, tools; never an actor thread);
// throws std::runtime_error when the copies failed.
void copy_and_wait(SwapEngine& engine, const SwapOrder& order);

}  // namespace conveyor
