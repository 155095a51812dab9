// BlockManager's swap half: the two-phase moves between device and host
// blocks (see block_manager.hpp).
#include <cstring>
#include <string>

#include "engine/block_manager.hpp"

namespace conveyor {

namespace {

Error location_error(uint64_t seq_id, SeqLocation where, const char* wanted) {
  return make_error(Errc::invalid_argument, "block manager: sequence " + std::to_string(seq_id) +
                                                " is " + to_string(where) + ", not " + wanted);
}

}  // namespace

Expected<SwapResult> BlockManager::swap_out(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return sequence_error(GrantStatus::unknown_sequence, seq_id);
  Seq& seq = it->second;
  if (seq.where != SeqLocation::device) return location_error(seq_id, seq.where, "on the device");
  SwapResult result;
  int32_t need = int32_t(seq.table.size());
  if (need > num_free_host_blocks()) {
    result.shortfall = need - num_free_host_blocks();
    return result;
  }
  result.copies.reserve(size_t(need));
  seq.host_table.reserve(size_t(need));
  for (BlockId b : seq.table) {
    BlockId h = host_free_.back();
    host_free_.pop_back();
    std::memcpy(host_tokens_.data() + size_t(h) * size_t(block_size_), tokens_of(b).data(),
                size_t(block_size_) * sizeof(int32_t));
    seq.host_table.push_back(h);
    result.copies.push_back({b, h});
  }
  seq.where = SeqLocation::swapping_out;
  counters_.swapped_out_blocks += uint64_t(need);
  return result;
}

Status BlockManager::complete_swap_out(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return sequence_error(GrantStatus::unknown_sequence, seq_id);
  Seq& seq = it->second;
  if (seq.where != SeqLocation::swapping_out)
    return location_error(seq_id, seq.where, "swapping out");
  for (auto b = seq.table.rbegin(); b != seq.table.rend(); ++b) release(*b);
  seq.table.clear();
  seq.num_registered = 0;
  seq.where = SeqLocation::host;
  return Status::ok();
}

Expected<SwapResult> BlockManager::swap_in(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return sequence_error(GrantStatus::unknown_sequence, seq_id);
  Seq& seq = it->second;
  if (seq.where != SeqLocation::host) return location_error(seq_id, seq.where, "on host");
  SwapResult result;
  int32_t need = int32_t(seq.host_table.size());
  if (need > num_available_blocks()) {
    result.shortfall = need - num_available_blocks();
    return result;
  }
  result.copies.reserve(size_t(need));
  seq.table.reserve(size_t(need));
  for (BlockId h : seq.host_table) {
    BlockId d = take_fresh();
    std::memcpy(tokens_of(d).data(), host_tokens_.data() + size_t(h) * size_t(block_size_),
                size_t(block_size_) * sizeof(int32_t));
    seq.table.push_back(d);
    result.copies.push_back({h, d});
  }
  seq.where = SeqLocation::swapping_in;
  counters_.swapped_in_blocks += uint64_t(need);
  return result;
}

Status BlockManager::complete_swap_in(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return sequence_error(GrantStatus::unknown_sequence, seq_id);
  Seq& seq = it->second;
  if (seq.where != SeqLocation::swapping_in) return location_error(seq_id, seq.where, "swapping in");
  for (auto h = seq.host_table.rbegin(); h != seq.host_table.rend(); ++h) host_free_.push_back(*h);
  seq.host_table.clear();
  seq.where = SeqLocation::device;
  register_computed(seq);
  return Status::ok();
}

bool BlockManager::can_swap_in(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it != seqs_.end() && it->second.where == SeqLocation::host &&
         int32_t(it->second.host_table.size()) <= num_available_blocks();
}

}  // namespace conveyor
