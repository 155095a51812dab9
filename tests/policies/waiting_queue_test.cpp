#include "policies/waiting_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace conveyor {
namespace {

std::vector<uint64_t> ids(const std::vector<WaitingEntry>& entries) {
  std::vector<uint64_t> out;
  for (const WaitingEntry& e : entries) out.push_back(e.id);
  return out;
}

TEST(WaitingQueue, LowerPriorityValueFirstThenFirstComeFirstServed) {
  // vLLM's meaning of the field: the lowest value runs soonest.
  WaitingQueue q(0.0);  // no aging
  q.push({1, 0, 0, 0.0});
  q.push({2, -5, 1, 1.0});
  q.push({3, 0, 2, 2.0});
  q.push({4, -5, 3, 3.0});
  q.push({5, 1, 4, 4.0});
  EXPECT_EQ(ids(q.ordered(100.0)), (std::vector<uint64_t>{2, 4, 1, 3, 5}));
  EXPECT_EQ(q.size(), 5u);
  EXPECT_EQ(q.front(100.0)->id, 2u);
  EXPECT_EQ(ids(q.ordered(100.0, 2)), (std::vector<uint64_t>{2, 4}));
}

TEST(WaitingQueue, RemoveAndReplace) {
  WaitingQueue q;
  q.push({1, 0, 0, 0.0});
  q.push({2, 0, 1, 1.0});
  EXPECT_TRUE(q.remove(1));
  EXPECT_FALSE(q.remove(1));
  EXPECT_FALSE(q.contains(1));
  EXPECT_EQ(ids(q.ordered(1.0)), (std::vector<uint64_t>{2}));
  q.push({2, 3, 1, 1.0});  // same id: replaced, not duplicated
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.ordered(1.0)[0].priority, 3);
  EXPECT_TRUE(q.remove(2));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.front(1.0), nullptr);
}

TEST(WaitingQueue, RequeuedEntryKeepsItsPlace) {
  WaitingQueue q(0.0);
  q.push({2, 0, 2, 2.0});
  q.push({3, 0, 3, 3.0});
  q.push({1, 0, 1, 1.0});  // preempted and re-queued with its original arrival
  EXPECT_EQ(ids(q.ordered(5.0)), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(WaitingQueue, AgingGainsOneLevelPerInterval) {
  WaitingQueue q(5.0);
  WaitingEntry late{1, 0, 0, 0.0};
  WaitingEntry urgent{2, -2, 1, 9.0};
  q.push(late);
  q.push(urgent);
  EXPECT_EQ(q.effective_priority(late, 4.9), 0);
  EXPECT_EQ(q.effective_priority(late, 5.0), -1);
  EXPECT_EQ(q.effective_priority(late, 9.5), -1);
  EXPECT_EQ(q.effective_priority(late, -3.0), 0);  // a clock going backwards does not age
  EXPECT_EQ(ids(q.ordered(9.5)), (std::vector<uint64_t>{2, 1}));
  // At t=10 both are at level -2; the older one wins the tie.
  EXPECT_EQ(ids(q.ordered(10.0)), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(WaitingQueue::aged_priority(3, 1.0, 11.0, 5.0), 1);
  EXPECT_EQ(WaitingQueue::aged_priority(3, 1.0, 11.0, 0.0), 3);  // no aging
}

TEST(WaitingQueue, ALargePriorityValueIsNeverStarved) {
  // Each second a new priority-(-3) request arrives and one request is served.
  // Without aging the priority-0 one would wait forever; with a 2 s interval
  // it must be served within about 3 * 2 s.
  WaitingQueue q(2.0);
  q.push({1000, 0, 0, 0.0});
  uint64_t arrival = 1;
  int served_at = -1;
  for (int t = 0; t < 100 && served_at < 0; ++t) {
    q.push({arrival, -3, arrival, double(t)});
    ++arrival;
    uint64_t first = q.front(double(t))->id;
    q.remove(first);
    if (first == 1000) served_at = t;
  }
  ASSERT_GE(served_at, 0) << "the low-priority request starved";
  EXPECT_LE(served_at, 8);

  WaitingQueue strict(0.0);
  strict.push({1000, 0, 0, 0.0});
  for (int t = 0; t < 100; ++t) {
    strict.push({uint64_t(t + 1), -3, uint64_t(t + 1), double(t)});
    uint64_t first = strict.front(double(t))->id;
    ASSERT_NE(first, 1000u);
    strict.remove(first);
  }
}

TEST(WaitingQueue, MergedOrderMatchesAFullSort) {
  WaitingQueue q(3.0);
  std::vector<WaitingEntry> all;
  for (uint64_t i = 0; i < 60; ++i) {
    WaitingEntry e{i, int32_t(i * 7 % 5) - 2, i, double(i % 17) * 1.5};
    all.push_back(e);
    q.push(e);
  }
  const double now = 40.0;
  std::vector<WaitingEntry> sorted = all;
  std::sort(sorted.begin(), sorted.end(), [&](const WaitingEntry& a, const WaitingEntry& b) {
    int64_t ea = q.effective_priority(a, now), eb = q.effective_priority(b, now);
    if (ea != eb) return ea < eb;
    if (a.time != b.time) return a.time < b.time;
    return a.arrival < b.arrival;
  });
  EXPECT_EQ(ids(q.ordered(now)), ids(sorted));
}

}  // namespace
}  // namespace conveyor
