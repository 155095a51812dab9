// SchedulerCore after an engine fault: the runner, block manager and swap
// engine were replaced, so everything they held or were to hear is dropped
// and every sequence starts afresh (or ends, past its retries).
#include <algorithm>
#include <string>
#include <vector>

#include "engine/scheduler_core.hpp"

namespace conveyor {

void SchedulerCore::recover_from_fault(const std::string& why) {
  // The sequences the lost work concerned: those holding KV, and those in
  // the iteration being built (a fault in their first allocation counts).
  std::vector<seq_id> touched;
  for (const Planned& p : plan_) touched.push_back(p.id);
  for (const auto& [id, s] : seqs_)
    if (s.state() != SeqState::waiting) touched.push_back(id);
  std::sort(touched.begin(), touched.end());
  // What the old block manager, runner and swap engine were to hear or do.
  flights_.clear();
  step_forks_.clear();
  deferred_frees_.clear();
  pending_progress_tokens_.clear();
  pending_computed_.clear();
  pending_forks_.clear();
  pending_frees_.clear();
  pending_free_blocks_ = 0;
  pending_swap_out_done_.clear();
  pending_swap_in_done_.clear();
  pending_swap_in_.clear();
  swap_out_requested_.clear();
  swap_orders_.clear();
  copies_.clear();
  retired_samplers_.clear();  // the fresh runner has none
  restored_.clear();
  failed_.clear();
  plan_.clear();
  drain_requested_ = false;
  last_applied_ = iteration_;
  free_blocks_ = config_.num_blocks;
  free_host_blocks_ = config_.num_host_blocks;
  running_.clear();
  swapped_.clear();
  prefix_claims_.clear();
  sessions_.clear();  // the fresh block manager holds nothing

  std::vector<seq_id> ids;
  ids.reserve(seqs_.size());
  for (const auto& [id, s] : seqs_) ids.push_back(id);
  std::sort(ids.begin(), ids.end(), [this](seq_id a, seq_id b) {
    return seqs_.at(a).arrival != seqs_.at(b).arrival ? seqs_.at(a).arrival < seqs_.at(b).arrival : a < b;
  });
  for (seq_id id : ids) {
    Sequence& s = seqs_.at(id);
    const bool involved = std::binary_search(touched.begin(), touched.end(), id);
    const bool was_padding = s.state() == SeqState::padding;
    s.restart();
    s.blocks_held = 0;
    s.block_table.clear();
    s.num_computed = s.scheduled = s.slots = s.committed = 0;
    s.unconfirmed = 0;
    s.last_plan = 0;
    s.plan_slot = -1;
    s.runner_has_sampler = false;
    s.prefix.hashes.clear();
    if (was_padding) {  // it already ended for its client
      erase_sequence(id);
      continue;
    }
    if (is_cancelled(id)) {
      waiting_.remove(id);
      finish(s, FinishReason::cancelled);
      continue;
    }
    if (involved && (!config_.recompute_after_fault || ++s.fault_retries > config_.max_fault_retries)) {
      waiting_.remove(id);
      const std::string tries = config_.recompute_after_fault
                                    ? " (restarted " + std::to_string(config_.max_fault_retries) + " times for it)"
                                    : "";
      finish(s, FinishReason::error, "the engine failed: " + why + tries, Errc::internal);
      continue;
    }
    if (!waiting_.contains(id)) waiting_.push(WaitingEntry{s.id, s.priority, s.arrival, s.arrival_time});
  }
  cancelled_.clear();
  num_padding_ = 0;
}

}  // namespace conveyor
