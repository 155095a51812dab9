// The priority scheduling policy's part of SchedulerCore
// (SchedulingPolicy::priority, vLLM's meaning: a lower priority runs sooner).
//
// The waiting queue orders requests by effective priority (WaitingQueue).
// What this file adds is preemption by priority: when the most urgent waiting
// request finds no room (every slot taken, admission said no, or its blocks
// were not granted), running sequences less urgent than it give theirs back
// by the configured preemption mode (swap or recompute, so the victims lose
// nothing but time), and it is admitted at the next iteration.
//
// Running sequences age like waiting ones, from their arrival: comparing
// like with like keeps the order stable, so a victim does not preempt its
// preemptor back once it has waited (the two age at the same rate), while a
// request that waits long enough still passes newer urgent ones (nobody
// starves).
#include <algorithm>
#include <cstdint>

#include "engine/scheduler_core.hpp"

namespace conveyor {

int64_t SchedulerCore::rank(const Sequence& s) const {
  return WaitingQueue::aged_priority(s.priority, s.arrival_time, now_, waiting_.aging_interval());
}

int32_t SchedulerCore::rank32(const Sequence& s) const {
  // A priority near INT32_MIN that has aged would wrap in int32_t.
  return int32_t(std::clamp<int64_t>(rank(s), INT32_MIN, INT32_MAX));
}

std::optional<int64_t> SchedulerCore::waiting_head_rank(double now) const {
  if (config_.scheduling_policy != SchedulingPolicy::priority) return std::nullopt;
  const WaitingEntry* head = waiting_.front(now);
  if (head == nullptr) return std::nullopt;
  return waiting_.effective_priority(*head, now);
}

std::optional<PreemptionQuery> SchedulerCore::priority_preemption() {
  if (config_.scheduling_policy != SchedulingPolicy::priority || blocked_head_ == 0)
    return std::nullopt;
  const Sequence* head = find(blocked_head_);
  if (head == nullptr || head->state() != SeqState::waiting || is_cancelled(head->id))
    return std::nullopt;
  const int64_t head_rank = rank(*head);
  // Blocks on their way to host memory will be free soon: wait for them
  // rather than preempt more.
  for (seq_id id : swapped_)
    if (seqs_.at(id).state() == SeqState::swapping_out) return std::nullopt;

  PreemptionQuery q;
  q.free_host_blocks = free_host_blocks_;
  int32_t victim_blocks = 0;
  for (seq_id id : running_) {
    const Sequence& s = seqs_.at(id);
    if (s.state() != SeqState::running || rank(s) <= head_rank) continue;
    q.running.push_back(candidate(s));
    victim_blocks += s.blocks_held;
  }
  if (q.running.empty()) return std::nullopt;

  const int32_t slots_short = running_sequences() + head->samples - config_.max_num_seqs;
  const int32_t need = blocks_for(int32_t(head->tokens.size()) + 1) * head->samples;
  const int32_t blocks_short = need - free_estimate();
  // Nothing to gain when even every candidate would not make room.
  if (victim_blocks < blocks_short || int32_t(q.running.size()) < slots_short) return std::nullopt;
  q.shortfall = std::max(blocks_short, 0);
  q.min_victims = std::max(slots_short, 0);
  // Room by the numbers, yet admission held it back (its watermark, blocks
  // owed to running requests): one victim at a time until it is admitted.
  if (q.shortfall == 0 && q.min_victims == 0) q.min_victims = 1;
  // Victims may only be chosen among sequences that no running step
  // touches: the next plan waits for the pipeline to drain.
  if (!flights_.empty()) {
    drain_requested_ = true;
    return std::nullopt;
  }
  blocked_head_ = 0;  // one round per iteration: the retried allocation must not ask again
  return q;
}

}  // namespace conveyor
