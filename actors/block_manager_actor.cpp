#include "actors/block_manager_actor.hpp"

namespace conveyor {

namespace {
std::vector<std::pair<int32_t, int32_t>> to_pairs(const std::vector<BlockCopy>& copies) {
  std::vector<std::pair<int32_t, int32_t>> out;
  out.reserve(copies.size());
  for (const BlockCopy& c : copies) out.emplace_back(c.src, c.dst);
  return out;
}
}  // namespace

AllocationResult apply_allocation_batch(BlockManager& bm, const AllocationBatch& batch) {
  // Errors below concern sequences that are already gone (a free racing a
  // completion, say): they change nothing, so they are ignored.
  for (const SeqProgress& p : batch.computed) {
    const std::span<const int32_t> tokens(batch.progress_tokens.data() + p.token_begin,
                                          size_t(p.token_end - p.token_begin));
    if (bm.set_tokens(p.seq, p.first, tokens)) (void)bm.commit_computed(p.seq, p.computed);
  }
  for (const SeqFork& f : batch.forks) (void)bm.fork(f.parent, f.child);
  for (seq_id id : batch.frees) (void)bm.free(id);
  for (seq_id id : batch.swap_out_done) (void)bm.complete_swap_out(id);
  for (seq_id id : batch.swap_in_done) (void)bm.complete_swap_in(id);

  AllocationResult result;
  for (seq_id id : batch.swap_out) {
    auto r = bm.swap_out(id);
    if (r && r->ok()) result.swaps.push_back(SwapOrder{id, SwapDirection::out, to_pairs(r->copies)});
  }
  for (seq_id id : batch.swap_in) {
    auto r = bm.swap_in(id);
    if (!r || !r->ok()) continue;
    result.swaps.push_back(SwapOrder{id, SwapDirection::in, to_pairs(r->copies)});
    auto table = bm.block_table(id);
    const auto begin = int32_t(result.blocks.size());
    result.blocks.insert(result.blocks.end(), table.begin(), table.end());
    result.swap_in_grants.push_back(BlockGrant{id, true, 0, 0, 0, begin, int32_t(result.blocks.size())});
  }

  thread_local std::vector<SlotRequest> requests;
  thread_local SlotBatchResult slots;
  requests.clear();
  for (const BlockRequest& r : batch.requests) {
    const std::span<const int32_t> tokens(batch.tokens.data() + r.token_begin,
                                          size_t(r.token_end - r.token_begin));
    requests.push_back(SlotRequest{r.seq, r.is_new ? SlotOp::prompt : SlotOp::append, tokens, -1, !r.uncached});
  }
  bm.allocate_batch(requests, slots);
  result.grants.reserve(slots.grants.size());
  const auto offset = int32_t(result.blocks.size());
  result.blocks.insert(result.blocks.end(), slots.blocks.begin(), slots.blocks.end());
  for (const SlotGrant& g : slots.grants) {
    result.grants.push_back(BlockGrant{g.seq_id, g.ok(), g.shortfall, g.num_cached_tokens,
                                       g.table_begin, offset + g.changed_begin,
                                       offset + g.changed_end});
  }
  result.copies = to_pairs(slots.copies);
  result.free_blocks = bm.num_available_blocks();
  result.free_host_blocks = bm.num_free_host_blocks();
  return result;
}

BlockStats block_stats(const BlockManager& bm) {
  const BlockManagerStats s = bm.stats();
  BlockStats out;
  out.total = s.total_blocks;
  out.used = s.used_blocks;
  out.free = s.free_blocks;
  out.cached = s.cached_blocks;
  out.host_total = s.host_total_blocks;
  out.host_used = s.host_used_blocks;
  out.prefix_queries = s.query_blocks;
  out.prefix_hits = s.hit_blocks;
  out.prefix_query_tokens = s.query_tokens;
  out.prefix_hit_tokens = s.hit_tokens;
  out.cow_copies = s.cow_copies;
  return out;
}

namespace {

struct block_manager_state {
  block_manager_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  std::unique_ptr<BlockManager> bm;
  std::shared_ptr<FaultInjector> faults;
};

block_manager_actor::behavior_type block_manager(
    block_manager_actor::stateful_pointer<block_manager_state> self, BlockManagerOptions options,
    std::shared_ptr<FaultInjector> faults) {
  self->state.bm = std::make_unique<BlockManager>(options.num_blocks, options.block_size,
                                                  options.prefix_caching, options.num_host_blocks);
  self->state.faults = std::move(faults);
  return {
      [self](alloc_atom, const AllocationBatch& batch) -> caf::result<AllocationResult> {
        if (auto& f = self->state.faults; f && f->hit(FaultPoint::alloc))
          return make_engine_error(
              Error{Errc::internal, "KV allocation: " + describe_fault(FaultPoint::alloc, f->count(FaultPoint::alloc))});
        return apply_allocation_batch(*self->state.bm, batch);
      },
      [self](stats_atom) { return block_stats(*self->state.bm); },
  };
}

}  // namespace

block_manager_actor spawn_block_manager(caf::actor_system& sys, const BlockManagerOptions& options,
                                        std::shared_ptr<FaultInjector> faults) {
  return sys.spawn(block_manager, options, std::move(faults));
}

}  // namespace conveyor
