// WorkQueue (http/work_queue.hpp): the threads that plan requests and
// compute embeddings off the I/O threads. Jobs run in order on one thread,
// side by side on several; a cancelled job that has not started never runs;
// the destructor lets running jobs end and drops queued ones.
#include "http/work_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace conveyor::http {
namespace {

TEST(WorkQueue, OneThreadRunsJobsInOrder) {
  std::vector<int> order;
  std::promise<void> last;
  {
    WorkQueue queue(1);
    for (int i = 0; i < 50; ++i) queue.submit([&order, i] { order.push_back(i); });
    queue.submit([&last] { last.set_value(); });
    last.get_future().wait();
  }
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[size_t(i)], i);
}

TEST(WorkQueue, ACancelledJobThatHasNotStartedNeverRuns) {
  WorkQueue queue(1);
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  queue.submit([&started, released] {
    started.set_value();
    released.wait();
  });
  started.get_future().wait();  // the thread is busy: the next jobs wait
  std::atomic<bool> ran{false};
  auto cancel = queue.submit([&ran] { ran = true; });
  std::promise<void> after;
  queue.submit([&after] { after.set_value(); });
  cancel();
  cancel();  // again: nothing
  release.set_value();
  after.get_future().wait();
  EXPECT_FALSE(ran);
}

// A job is due at its submission plus its expected time: a short job passes
// long ones queued before it, equal ones keep their order, and a long job
// goes before a short one submitted after it was due.
TEST(WorkQueue, JobsRunInTheOrderTheyAreDue) {
  using std::chrono::milliseconds;
  std::vector<std::string> order;
  std::promise<void> started, release, last;
  std::shared_future<void> released = release.get_future().share();
  WorkQueue queue(1);
  queue.submit([&started, released] {
    started.set_value();
    released.wait();
  });
  ASSERT_EQ(started.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  queue.submit([&order] { order.push_back("long 1"); }, std::chrono::hours(1));
  queue.submit([&order] { order.push_back("long 2"); }, std::chrono::hours(1));
  queue.submit([&order] { order.push_back("short"); }, std::chrono::minutes(10));
  queue.submit([&order] { order.push_back("plain"); });
  queue.submit([&order] { order.push_back("due soon"); }, milliseconds(2));
  std::this_thread::sleep_for(milliseconds(5));  // "due soon" is due now
  queue.submit([&order] { order.push_back("after"); });
  queue.submit([&last] { last.set_value(); }, std::chrono::hours(2));  // capped at kMaxExpected: after the others
  release.set_value();
  ASSERT_EQ(last.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<std::string>{"plain", "due soon", "after", "short", "long 1", "long 2"}));
}

TEST(WorkQueue, SeveralThreadsRunJobsSideBySide) {
  WorkQueue queue(2);
  std::promise<void> first_in, second_in;
  std::shared_future<void> a = first_in.get_future().share(), b = second_in.get_future().share();
  std::promise<void> done_a, done_b;
  // Each job waits for the other to have started: one thread would deadlock.
  queue.submit([&] {
    first_in.set_value();
    b.wait();
    done_a.set_value();
  });
  queue.submit([&] {
    second_in.set_value();
    a.wait();
    done_b.set_value();
  });
  done_a.get_future().wait();
  done_b.get_future().wait();
}

TEST(WorkQueue, DestructionLetsTheRunningJobEndAndDropsTheQueued) {
  std::atomic<int> ran{0};
  std::function<void()> cancel_later;
  std::promise<void> release;
  std::thread releaser;
  {
    WorkQueue queue(1);
    std::promise<void> started;
    std::shared_future<void> released = release.get_future().share();
    queue.submit([&, released] {
      started.set_value();
      released.wait();
      ++ran;
    });
    started.get_future().wait();
    for (int i = 0; i < 10; ++i) cancel_later = queue.submit([&ran] { ran += 100; });
    // The running job ends once the destructor has dropped the queued ones.
    releaser = std::thread([&release] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release.set_value();
    });
  }
  releaser.join();
  EXPECT_EQ(ran, 1);
  cancel_later();  // the queue is gone: nothing happens
}

}  // namespace
}  // namespace conveyor::http
