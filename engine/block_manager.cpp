#include "engine/block_manager.hpp"

#include <algorithm>
#include <cstring>

namespace conveyor {

const char* to_string(GrantStatus s) {
  switch (s) {
    case GrantStatus::ok: return "ok";
    case GrantStatus::short_of_blocks: return "short of blocks";
    case GrantStatus::skipped: return "skipped";
    case GrantStatus::unknown_sequence: return "unknown sequence";
    case GrantStatus::sequence_exists: return "sequence exists";
    case GrantStatus::not_on_device: return "sequence is not on the device (swapped or swapping)";
    case GrantStatus::invalid_argument: return "invalid argument";
  }
  return "?";
}

const char* to_string(SeqLocation where) {
  switch (where) {
    case SeqLocation::device: return "device";
    case SeqLocation::swapping_out: return "swapping out";
    case SeqLocation::host: return "host";
    case SeqLocation::swapping_in: return "swapping in";
  }
  return "?";
}

Error BlockManager::sequence_error(GrantStatus s, uint64_t seq_id) {
  return make_error(Errc::invalid_argument,
                    "block manager: sequence " + std::to_string(seq_id) + ": " + to_string(s));
}

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
                           int32_t num_host_blocks)
    : block_size_(std::max(block_size, 1)),
      prefix_caching_(enable_prefix_caching),
      blocks_(size_t(std::max(num_blocks, 1))),
      tokens_(blocks_.size() * size_t(block_size_), 0),
      index_(int32_t(blocks_.size())),
      host_tokens_(size_t(std::max(num_host_blocks, 0)) * size_t(block_size_), 0) {
  // Stacks: the lowest id is taken first, which keeps tests readable.
  free_.reserve(blocks_.size());
  for (BlockId b = BlockId(blocks_.size()) - 1; b >= 0; --b) free_.push_back(b);
  int32_t host = std::max(num_host_blocks, 0);
  host_free_.reserve(size_t(host));
  for (BlockId b = host - 1; b >= 0; --b) host_free_.push_back(b);
  hits_.reserve(blocks_.size());
  seqs_.reserve(256);
}

// ---- LRU of cached blocks --------------------------------------------------

void BlockManager::lru_push_back(BlockId b) {
  Block& blk = blocks_[b];
  blk.lru_prev = lru_tail_;
  blk.lru_next = -1;
  blk.in_lru = true;
  if (lru_tail_ >= 0) blocks_[lru_tail_].lru_next = b; else lru_head_ = b;
  lru_tail_ = b;
  ++lru_size_;
}

void BlockManager::lru_remove(BlockId b) {
  Block& blk = blocks_[b];
  if (blk.lru_prev >= 0) blocks_[blk.lru_prev].lru_next = blk.lru_next; else lru_head_ = blk.lru_next;
  if (blk.lru_next >= 0) blocks_[blk.lru_next].lru_prev = blk.lru_prev; else lru_tail_ = blk.lru_prev;
  blk.lru_prev = blk.lru_next = -1;
  blk.in_lru = false;
  --lru_size_;
}

// ---- block life cycle ------------------------------------------------------

BlockId BlockManager::find_in_index(uint64_t hash, uint64_t parent_id,
                                    std::span<const int32_t> tokens) const {
  return index_.find(hash, [&](int32_t c) {
    return blocks_[c].parent_id == parent_id &&
           std::memcmp(tokens_of(c).data(), tokens.data(), tokens.size_bytes()) == 0;
  });
}

// Callers check availability first; this never fails.
BlockId BlockManager::take_fresh() {
  BlockId b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = lru_head_;
    lru_remove(b);
    index_.erase(blocks_[b].key_hash, b);
    blocks_[b].indexed = false;
    blocks_[b].prefix_id = 0;
    ++counters_.evictions;
  }
  blocks_[b].ref = 1;
  return b;
}

// One reference fewer; at zero the block is cached if its content is worth
// keeping and nobody else keeps it, free otherwise.
void BlockManager::release(BlockId b) {
  Block& blk = blocks_[b];
  if (--blk.ref > 0) return;
  if (blk.prefix_id != 0 && !blk.indexed &&
      find_in_index(blk.key_hash, blk.parent_id, tokens_of(b)) < 0) {
    index_.insert(blk.key_hash, b);  // a duplicate whose representative is gone
    blk.indexed = true;
  }
  if (blk.indexed) {
    lru_push_back(b);
    return;
  }
  blk.prefix_id = 0;
  free_.push_back(b);
}

void BlockManager::register_block(Seq& seq, int32_t index) {
  BlockId b = seq.table[size_t(index)];
  Block& blk = blocks_[b];
  if (blk.prefix_id != 0) return;  // shared with a fork that registered it first
  uint64_t parent = index == 0 ? 0 : blocks_[seq.table[size_t(index) - 1]].prefix_id;
  std::span<const int32_t> toks = tokens_of(b);
  uint64_t hash = prefix_key_hash(parent, toks);
  blk.parent_id = parent;
  blk.key_hash = hash;
  BlockId rep = find_in_index(hash, parent, toks);
  if (rep >= 0) {
    blk.prefix_id = blocks_[rep].prefix_id;  // same content computed twice
    return;
  }
  blk.prefix_id = next_prefix_id_++;
  blk.indexed = true;
  index_.insert(hash, b);
}

void BlockManager::match_prefix(std::span<const int32_t> tokens) {
  hits_.clear();
  if (!prefix_caching_) return;
  size_t eligible = (tokens.size() - 1) / size_t(block_size_);
  uint64_t parent = 0;
  for (size_t i = 0; i < eligible; ++i) {
    std::span<const int32_t> toks = tokens.subspan(i * size_t(block_size_), size_t(block_size_));
    BlockId b = find_in_index(prefix_key_hash(parent, toks), parent, toks);
    if (b < 0) break;
    hits_.push_back(b);
    parent = blocks_[b].prefix_id;
  }
}

// ---- allocation ------------------------------------------------------------

BlockManager::Outcome BlockManager::do_prompt(uint64_t seq_id, std::span<const int32_t> tokens,
                                              std::vector<BlockId>& changed, bool match) {
  Outcome out;
  if (tokens.empty()) return {GrantStatus::invalid_argument};
  if (seqs_.count(seq_id)) return {GrantStatus::sequence_exists};
  if (match) match_prefix(tokens);
  else hits_.clear();
  int32_t total = blocks_for(int64_t(tokens.size()));
  int32_t hits = int32_t(hits_.size());
  int32_t cached_hits = 0;
  for (BlockId b : hits_) cached_hits += blocks_[b].ref == 0 ? 1 : 0;
  // A hit on a cached block takes it out of the evictable pool.
  int32_t cost = (total - hits) + cached_hits;
  if (cost > num_available_blocks()) {
    out.status = GrantStatus::short_of_blocks;
    out.shortfall = cost - num_available_blocks();
    return out;
  }
  Seq& seq = seqs_[seq_id];
  seq.table.reserve(size_t(total));
  for (BlockId b : hits_) {  // pin the hits before fresh blocks may evict
    if (blocks_[b].in_lru) lru_remove(b);
    ++blocks_[b].ref;
    seq.table.push_back(b);
  }
  for (int32_t i = hits; i < total; ++i) {
    BlockId b = take_fresh();
    size_t begin = size_t(i) * size_t(block_size_);
    size_t n = std::min(tokens.size() - begin, size_t(block_size_));
    std::memcpy(tokens_of(b).data(), tokens.data() + begin, n * sizeof(int32_t));
    seq.table.push_back(b);
  }
  seq.num_tokens = int32_t(tokens.size());
  seq.num_computed = hits * block_size_;
  seq.num_registered = hits;
  changed.insert(changed.end(), seq.table.begin(), seq.table.end());

  counters_.prefix_queries += prefix_caching_ && match ? 1 : 0;
  counters_.query_blocks += prefix_caching_ && match ? (tokens.size() - 1) / size_t(block_size_) : 0;
  counters_.hit_blocks += uint64_t(hits);
  counters_.query_tokens += prefix_caching_ && match ? tokens.size() : 0;
  counters_.hit_tokens += uint64_t(seq.num_computed);
  out.num_cached_tokens = seq.num_computed;
  return out;
}

BlockManager::Outcome BlockManager::do_commit(Seq& seq, int32_t num_computed) {
  if (seq.where != SeqLocation::device) return {GrantStatus::not_on_device};
  if (num_computed < seq.num_computed || num_computed > seq.num_tokens)
    return {GrantStatus::invalid_argument};
  seq.num_computed = num_computed;
  register_computed(seq);
  return {};
}

void BlockManager::register_computed(Seq& seq) {
  if (!prefix_caching_) return;
  int32_t full = seq.num_computed / block_size_;
  while (seq.num_registered < full) register_block(seq, seq.num_registered++);
}

BlockManager::Outcome BlockManager::do_append(uint64_t seq_id, std::span<const int32_t> tokens,
                                              int32_t num_computed,
                                              std::vector<BlockId>& changed,
                                              std::vector<BlockCopy>& copies) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return {GrantStatus::unknown_sequence};
  Seq& seq = it->second;
  if (seq.where != SeqLocation::device) return {GrantStatus::not_on_device};
  if (num_computed >= 0) {
    Outcome c = do_commit(seq, num_computed);
    if (c.status != GrantStatus::ok) return c;
  }
  Outcome out;
  out.table_begin = int32_t(seq.table.size());
  if (tokens.empty()) return out;
  int32_t need = blocks_needed_to_append(seq_id, int32_t(tokens.size()));
  if (need > num_available_blocks()) {
    out.status = GrantStatus::short_of_blocks;
    out.shortfall = need - num_available_blocks();
    return out;
  }
  int32_t fill = seq.num_tokens % block_size_;
  if (fill != 0 && blocks_[seq.table.back()].ref > 1) {
    BlockId src = seq.table.back();
    BlockId dst = take_fresh();
    std::memcpy(tokens_of(dst).data(), tokens_of(src).data(), size_t(fill) * sizeof(int32_t));
    --blocks_[src].ref;  // was > 1: stays in use
    seq.table.back() = dst;
    copies.push_back({src, dst});
    ++counters_.cow_copies;
    out.table_begin = int32_t(seq.table.size()) - 1;
  }
  for (int32_t t : tokens) {
    int32_t slot = seq.num_tokens % block_size_;
    if (slot == 0) seq.table.push_back(take_fresh());
    tokens_of(seq.table.back())[size_t(slot)] = t;
    ++seq.num_tokens;
  }
  changed.insert(changed.end(), seq.table.begin() + out.table_begin, seq.table.end());
  return out;
}

int32_t BlockManager::blocks_needed_to_append(uint64_t seq_id, int32_t n) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || it->second.where != SeqLocation::device || n < 0) return -1;
  const Seq& seq = it->second;
  if (n == 0) return 0;
  int32_t fill = seq.num_tokens % block_size_;
  int32_t cow = (fill != 0 && blocks_[seq.table.back()].ref > 1) ? 1 : 0;
  int32_t room = fill != 0 ? block_size_ - fill : 0;
  int32_t fresh = n > room ? blocks_for(int64_t(n) - room) : 0;
  return cow + fresh;
}

Expected<PromptAllocation> BlockManager::allocate_prompt(uint64_t seq_id,
                                                         std::span<const int32_t> tokens) {
  PromptAllocation result;
  Outcome o = do_prompt(seq_id, tokens, result.block_table);
  if (o.status == GrantStatus::short_of_blocks) {
    result.shortfall = o.shortfall;
    return result;
  }
  if (o.status != GrantStatus::ok) return sequence_error(o.status, seq_id);
  result.num_cached_tokens = o.num_cached_tokens;
  return result;
}

Expected<AppendResult> BlockManager::append_slots(uint64_t seq_id,
                                                  std::span<const int32_t> tokens) {
  AppendResult result;
  std::vector<BlockCopy> copies;
  Outcome o = do_append(seq_id, tokens, -1, result.changed, copies);
  if (o.status == GrantStatus::short_of_blocks) {
    result.shortfall = o.shortfall;
    return result;
  }
  if (o.status != GrantStatus::ok) return sequence_error(o.status, seq_id);
  result.table_begin = o.table_begin;
  if (!copies.empty()) result.copy = copies.front();
  return result;
}

Status BlockManager::commit_computed(uint64_t seq_id, int32_t num_computed) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return sequence_error(GrantStatus::unknown_sequence, seq_id);
  Outcome o = do_commit(it->second, num_computed);
  if (o.status != GrantStatus::ok) return sequence_error(o.status, seq_id);
  return Status::ok();
}

void BlockManager::allocate_batch(std::span<const SlotRequest> requests, SlotBatchResult& out,
                                  OnShortfall on_shortfall) {
  out.clear();
  out.grants.reserve(requests.size());
  int64_t missing = 0;  // blocks wanted by requests that fell short or were skipped
  bool stopped = false;
  for (const SlotRequest& r : requests) {
    SlotGrant g;
    g.seq_id = r.seq_id;
    g.changed_begin = int32_t(out.blocks.size());
    if (stopped) {
      g.status = GrantStatus::skipped;
      if (r.op == SlotOp::append && r.num_computed >= 0) {  // the commit still applies
        auto it = seqs_.find(r.seq_id);
        GrantStatus c = it == seqs_.end() ? GrantStatus::unknown_sequence
                                          : do_commit(it->second, r.num_computed).status;
        if (c != GrantStatus::ok) g.status = c;
      }
      g.shortfall = r.op == SlotOp::append
                        ? std::max(blocks_needed_to_append(r.seq_id, int32_t(r.tokens.size())), 0)
                        : blocks_for(int64_t(r.tokens.size()));
      missing += g.shortfall;
    } else {
      Outcome o = r.op == SlotOp::prompt
                      ? do_prompt(r.seq_id, r.tokens, out.blocks, r.match_prefix)
                      : do_append(r.seq_id, r.tokens, r.num_computed, out.blocks, out.copies);
      g.status = o.status;
      g.shortfall = o.shortfall;
      g.num_cached_tokens = o.num_cached_tokens;
      g.table_begin = o.table_begin;
      if (o.status == GrantStatus::short_of_blocks) {
        missing += o.shortfall + num_available_blocks();  // its whole need
        stopped = on_shortfall == OnShortfall::stop;
      }
    }
    g.changed_end = int32_t(out.blocks.size());
    out.grants.push_back(g);
  }
  out.shortfall = int32_t(std::max<int64_t>(missing - num_available_blocks(), 0));
}

Status BlockManager::fork(uint64_t parent_seq_id, uint64_t child_seq_id) {
  auto it = seqs_.find(parent_seq_id);
  if (it == seqs_.end()) return sequence_error(GrantStatus::unknown_sequence, parent_seq_id);
  if (it->second.where != SeqLocation::device)
    return sequence_error(GrantStatus::not_on_device, parent_seq_id);
  if (seqs_.count(child_seq_id)) return sequence_error(GrantStatus::sequence_exists, child_seq_id);
  Seq child = it->second;  // copy before inserting: the insert may rehash
  for (BlockId b : child.table) ++blocks_[b].ref;
  seqs_.emplace(child_seq_id, std::move(child));
  return Status::ok();
}

Status BlockManager::set_tokens(uint64_t seq_id, int32_t pos, std::span<const int32_t> tokens) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return sequence_error(GrantStatus::unknown_sequence, seq_id);
  Seq& seq = it->second;
  if (seq.where != SeqLocation::device) return sequence_error(GrantStatus::not_on_device, seq_id);
  const auto n = int64_t(tokens.size());
  if (n == 0) return Status::ok();
  if (pos < seq.num_registered * block_size_ || pos + n > seq.num_tokens)
    return sequence_error(GrantStatus::invalid_argument, seq_id);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos + i;
    tokens_of(seq.table[size_t(p / block_size_)])[size_t(p % block_size_)] = tokens[size_t(i)];
  }
  return Status::ok();
}

Status BlockManager::free(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return sequence_error(GrantStatus::unknown_sequence, seq_id);
  Seq& seq = it->second;
  // Last block first: among one sequence's cached blocks, the tail of the
  // prefix becomes least recent and is evicted before the blocks it extends.
  for (auto b = seq.table.rbegin(); b != seq.table.rend(); ++b) release(*b);
  for (auto h = seq.host_table.rbegin(); h != seq.host_table.rend(); ++h) host_free_.push_back(*h);
  seqs_.erase(it);
  return Status::ok();
}

// ---- queries ---------------------------------------------------------------

std::optional<SeqLocation> BlockManager::location(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return std::nullopt;
  return it->second.where;
}

std::span<const BlockId> BlockManager::block_table(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return {};
  return it->second.table;
}

std::span<const BlockId> BlockManager::host_block_table(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return {};
  return it->second.host_table;
}

int32_t BlockManager::num_tokens(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : it->second.num_tokens;
}

int32_t BlockManager::num_computed(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : it->second.num_computed;
}

BlockManagerStats BlockManager::stats() const {
  BlockManagerStats s = counters_;
  s.total_blocks = num_blocks();
  s.free_blocks = num_free_blocks();
  s.cached_blocks = lru_size_;
  s.used_blocks = s.total_blocks - s.free_blocks - s.cached_blocks;
  s.host_total_blocks = num_host_blocks();
  s.host_free_blocks = num_free_host_blocks();
  s.host_used_blocks = s.host_total_blocks - s.host_free_blocks;
  return s;
}

void BlockManager::reset_prefix_stats() {
  counters_.prefix_queries = counters_.query_blocks = counters_.hit_blocks = 0;
  counters_.query_tokens = counters_.hit_tokens = 0;
}

}  // namespace conveyor
