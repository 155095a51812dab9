// BlockManager::check_invariants: recounts everything from the block tables
// and compares with the manager's bookkeeping. For tests; O(blocks + entries).
#include <cstring>
#include <unordered_map>

#include "engine/block_manager.hpp"

namespace conveyor {

Status BlockManager::check_invariants() const {
  auto fail = [](const std::string& what) {
    return Status(make_error(Errc::invalid_argument, "block manager invariant: " + what));
  };
  auto bid = [](int64_t b) { return "block " + std::to_string(b); };
  const size_t n = blocks_.size();
  const int32_t host_n = num_host_blocks();
  std::vector<int32_t> refs(n, 0);
  std::vector<int32_t> host_holders(size_t(host_n), 0);

  for (const auto& [id, s] : seqs_) {
    std::string who = "sequence " + std::to_string(id);
    const bool on_device = s.where != SeqLocation::host;
    const bool on_host = s.where != SeqLocation::device;
    const int32_t want = s.num_tokens < 0 ? -1 : blocks_for(s.num_tokens);
    if (int32_t(s.table.size()) != (on_device ? want : 0) ||
        int32_t(s.host_table.size()) != (on_host ? want : 0))
      return fail(who + ": table sizes do not match its tokens and location");
    if (s.num_computed < 0 || s.num_computed > s.num_tokens)
      return fail(who + ": computed tokens out of range");
    if (s.num_registered < 0 || s.num_registered > s.num_computed / block_size_ ||
        (!prefix_caching_ && s.num_registered != 0))
      return fail(who + ": registered blocks beyond its computed full blocks");
    if ((s.where == SeqLocation::host || s.where == SeqLocation::swapping_in) &&
        s.num_registered != 0)
      return fail(who + ": registered blocks whose KV is not on the device");
    for (BlockId h : s.host_table) {
      if (h < 0 || h >= host_n) return fail(who + ": host block out of range");
      ++host_holders[size_t(h)];
    }
    for (size_t i = 0; i < s.table.size(); ++i) {
      BlockId b = s.table[i];
      if (b < 0 || size_t(b) >= n) return fail(who + ": block out of range");
      ++refs[size_t(b)];
      if (int32_t(i) < s.num_registered) {
        const Block& blk = blocks_[size_t(b)];
        uint64_t parent = i == 0 ? 0 : blocks_[size_t(s.table[i - 1])].prefix_id;
        if (blk.prefix_id == 0 || blk.parent_id != parent)
          return fail(who + ": " + bid(b) + " breaks the prefix chain");
      }
    }
  }

  std::vector<uint8_t> place(n, 0);  // 1: free list, 2: LRU
  for (BlockId b : free_) {
    if (b < 0 || size_t(b) >= n) return fail("free list holds an out-of-range block");
    if (place[size_t(b)] != 0) return fail(bid(b) + " is on the free list twice");
    place[size_t(b)] = 1;
  }
  int32_t lru_count = 0;
  BlockId prev = -1;
  for (BlockId b = lru_head_; b >= 0; b = blocks_[size_t(b)].lru_next) {
    if (size_t(b) >= n || place[size_t(b)] != 0 || lru_count > int32_t(n))
      return fail("LRU list is corrupt at " + bid(b));
    if (blocks_[size_t(b)].lru_prev != prev) return fail("LRU back link broken at " + bid(b));
    place[size_t(b)] = 2;
    prev = b;
    ++lru_count;
  }
  if (prev != lru_tail_ || lru_count != lru_size_) return fail("LRU tail or size is wrong");

  int32_t indexed = 0;
  std::unordered_map<uint64_t, BlockId> by_prefix;  // prefix id -> a block holding it
  for (size_t i = 0; i < n; ++i) {
    const Block& blk = blocks_[i];
    BlockId b = BlockId(i);
    if (blk.ref < 0) return fail(bid(b) + " has a negative reference count");
    if (blk.ref != refs[i])
      return fail(bid(b) + " has ref " + std::to_string(blk.ref) + " but " +
                  std::to_string(refs[i]) + " tables hold it");
    if (blk.ref > 0 && place[i] != 0) return fail(bid(b) + " is in use and free or cached");
    if (blk.ref == 0 && place[i] == 0) return fail(bid(b) + " is lost: unused, not free or cached");
    if (blk.in_lru != (place[i] == 2)) return fail(bid(b) + " has a wrong LRU flag");
    if (place[i] == 2 && !blk.indexed) return fail(bid(b) + " is cached but not indexed");
    if (place[i] == 1 && (blk.indexed || blk.prefix_id != 0))
      return fail(bid(b) + " is free but still registered");
    if (!prefix_caching_ && (blk.indexed || blk.prefix_id != 0))
      return fail(bid(b) + " is registered with prefix caching off");
    if (blk.prefix_id >= next_prefix_id_) return fail(bid(b) + " has an unissued prefix id");
    if (blk.prefix_id != 0) {
      if (blk.key_hash != prefix_key_hash(blk.parent_id, tokens_of(b)))
        return fail(bid(b) + " has a stale key hash");
      auto [it, fresh] = by_prefix.emplace(blk.prefix_id, b);
      const Block& other = blocks_[size_t(it->second)];
      if (!fresh && (other.parent_id != blk.parent_id ||
                     std::memcmp(tokens_of(it->second).data(), tokens_of(b).data(),
                                 size_t(block_size_) * sizeof(int32_t)) != 0))
        return fail("prefix id " + std::to_string(blk.prefix_id) + " names two contents");
    }
    if (blk.indexed) {
      ++indexed;
      if (blk.prefix_id == 0) return fail(bid(b) + " is indexed without a prefix id");
      if (find_in_index(blk.key_hash, blk.parent_id, tokens_of(b)) != b)
        return fail(bid(b) + " is not found in the index under its own key");
    }
  }
  if (indexed != index_.size()) return fail("index size differs from indexed blocks");

  std::vector<uint8_t> host_free(size_t(host_n), 0);
  for (BlockId h : host_free_) {
    if (h < 0 || h >= host_n || host_free[size_t(h)]) return fail("host free list is corrupt");
    host_free[size_t(h)] = 1;
  }
  for (int32_t h = 0; h < host_n; ++h)
    if (host_holders[size_t(h)] + host_free[size_t(h)] != 1)
      return fail("host block " + std::to_string(h) + " is not in exactly one place");
  return Status::ok();
}

}  // namespace conveyor
