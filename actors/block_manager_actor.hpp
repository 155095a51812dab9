// The block manager actor: owns the BlockManager (engine/block_manager.hpp)
// and applies the scheduler's one allocation batch per iteration.
//
// Receives: (alloc, AllocationBatch) -> AllocationResult; (stats) -> BlockStats
// A batch is applied in field order: computed-token progress (registers full
// blocks in the prefix cache), frees, swap completions, swap-outs, swap-ins,
// then the requests, each all-or-nothing.
#pragma once

#include "engine/block_manager.hpp"
#include "engine/fault_injection.hpp"
#include "actors/messages.hpp"

namespace conveyor {

struct BlockManagerOptions {
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_host_blocks = 0;
  bool prefix_caching = true;
};

// `faults` (may be null) can make allocation batches fail (tests).
block_manager_actor spawn_block_manager(caf::actor_system& sys, const BlockManagerOptions& options,
                                        std::shared_ptr<FaultInjector> faults = nullptr);

// The actor's work, without the actor: tests call it directly.
AllocationResult apply_allocation_batch(BlockManager& bm, const AllocationBatch& batch);
BlockStats block_stats(const BlockManager& bm);

}  // namespace conveyor
