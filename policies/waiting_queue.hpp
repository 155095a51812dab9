// The waiting queue's order: the lowest priority value first (vLLM's
// meaning: lower runs sooner), first come first served within a priority,
// with aging so that a large value is never starved.
//
// Aging is by waiting time: an entry's effective priority is
//   priority - floor((now - time) / aging_interval_seconds)
// so it gains one level every aging_interval_seconds (default 5 s) it has
// waited, and eventually passes any fixed priority that newer requests carry.
// Ties go to the earlier `time`, then the smaller `arrival`. An entry
// re-queued after a recompute preemption keeps its original time and arrival
// and so goes back near the front. aging_interval_seconds <= 0 turns aging
// off (strict priority). `time` and `now` may be any clock in seconds, as long
// as the caller uses one clock.
//
// Cost: entries of one priority are kept sorted by (time, arrival), which is
// also their order by effective priority, so the global order is a merge of
// the per-priority lists: ordered(now, limit) is O(limit * levels); push and
// remove are O(log n).
//
// Thread-safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

namespace conveyor {

struct WaitingEntry {
  uint64_t id = 0;
  int32_t priority = 0;   // lower runs sooner
  uint64_t arrival = 0;   // submission order (FCFS tie-break)
  double time = 0.0;      // when it arrived, in seconds: aging counts from here
};

class WaitingQueue {
 public:
  explicit WaitingQueue(double aging_interval_seconds = 5.0)
      : aging_interval_(aging_interval_seconds) {}

  // Adds an entry; an id already queued is replaced.
  void push(const WaitingEntry& entry);
  // Removes the entry with this id; false if it is not queued.
  bool remove(uint64_t id);
  bool contains(uint64_t id) const { return where_.count(id) != 0; }
  size_t size() const { return where_.size(); }
  bool empty() const { return where_.empty(); }

  // The first `limit` entries in order at time `now`. The reference stays
  // valid until the next call on this queue.
  const std::vector<WaitingEntry>& ordered(double now,
                                           size_t limit = std::numeric_limits<size_t>::max()) const;
  // The entry that would come first at `now`; nullptr when empty.
  const WaitingEntry* front(double now) const;

  // The effective priority of an entry at `now` (see above): lower is sooner.
  int64_t effective_priority(const WaitingEntry& e, double now) const {
    return aged_priority(e.priority, e.time, now, aging_interval_);
  }
  // The same for any priority that has waited since `since` (the scheduler
  // ages running sequences alike, so that preemption by priority compares
  // like with like and does not swing back and forth).
  static int64_t aged_priority(int32_t priority, double since, double now, double interval);
  double aging_interval() const { return aging_interval_; }
  void set_aging_interval(double seconds) { aging_interval_ = seconds; }

 private:
  struct ByTime {
    bool operator()(const WaitingEntry& a, const WaitingEntry& b) const {
      if (a.time != b.time) return a.time < b.time;
      if (a.arrival != b.arrival) return a.arrival < b.arrival;
      return a.id < b.id;
    }
  };
  using Level = std::set<WaitingEntry, ByTime>;

  double aging_interval_;
  std::map<int32_t, Level> levels_;                 // by base priority
  std::unordered_map<uint64_t, WaitingEntry> where_;  // id -> its entry
  mutable std::vector<WaitingEntry> ordered_;        // ordered()'s answer
  mutable std::vector<std::pair<Level::const_iterator, Level::const_iterator>> cursors_;
};

}  // namespace conveyor
