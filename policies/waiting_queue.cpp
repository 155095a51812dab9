#include "policies/waiting_queue.hpp"

#include <cmath>

namespace conveyor {

void WaitingQueue::push(const WaitingEntry& entry) {
  remove(entry.id);
  levels_[entry.priority].insert(entry);
  where_.emplace(entry.id, entry);
}

bool WaitingQueue::remove(uint64_t id) {
  auto it = where_.find(id);
  if (it == where_.end()) return false;
  auto level = levels_.find(it->second.priority);
  level->second.erase(it->second);
  if (level->second.empty()) levels_.erase(level);
  where_.erase(it);
  return true;
}

int64_t WaitingQueue::aged_priority(int32_t priority, double since, double now, double interval) {
  if (interval <= 0.0 || !(now > since)) return priority;
  // Capped so that absurd clocks cannot overflow.
  const double steps = std::min(std::floor((now - since) / interval), double(1 << 30));
  return int64_t(priority) - int64_t(steps);
}

const std::vector<WaitingEntry>& WaitingQueue::ordered(double now, size_t limit) const {
  ordered_.clear();
  cursors_.clear();
  for (const auto& [priority, level] : levels_) cursors_.emplace_back(level.begin(), level.end());
  ByTime earlier;
  while (ordered_.size() < limit) {
    // Each level's head is its best entry; take the best head.
    size_t best = cursors_.size();
    int64_t best_eff = 0;
    for (size_t i = 0; i < cursors_.size(); ++i) {
      if (cursors_[i].first == cursors_[i].second) continue;
      const WaitingEntry& e = *cursors_[i].first;
      int64_t eff = effective_priority(e, now);
      if (best == cursors_.size() || eff < best_eff ||
          (eff == best_eff && earlier(e, *cursors_[best].first))) {
        best = i;
        best_eff = eff;
      }
    }
    if (best == cursors_.size()) break;
    ordered_.push_back(*cursors_[best].first++);
  }
  return ordered_;
}

const WaitingEntry* WaitingQueue::front(double now) const {
  const auto& first = ordered(now, 1);
  return first.empty() ? nullptr : &first.front();
}

}  // namespace conveyor
