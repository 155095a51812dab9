#include "http/work_queue.hpp"

#include <algorithm>

namespace conveyor::http {

WorkQueue::WorkQueue(int threads) : max_threads_(std::max(1, threads)) {}

WorkQueue::~WorkQueue() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(queue_->mutex);
    queue_->stopping = true;
    queue_->jobs.clear();
    threads.swap(threads_);
  }
  queue_->wake.notify_all();
  for (std::thread& t : threads) t.join();
}

std::function<void()> WorkQueue::submit(std::function<void()> job, std::chrono::nanoseconds expected) {
  Due due;
  {
    std::lock_guard lock(queue_->mutex);
    const auto wait = std::clamp<std::chrono::nanoseconds>(expected, std::chrono::nanoseconds(0), kMaxExpected);
    due = Due{std::chrono::steady_clock::now() + wait, queue_->next_id++};
    queue_->jobs.emplace(due, std::move(job));
    if (int(threads_.size()) < max_threads_) threads_.emplace_back([this] { run(); });
  }
  queue_->wake.notify_one();
  return [weak = std::weak_ptr<Queue>(queue_), due] {
    const auto queue = weak.lock();
    if (!queue) return;
    std::lock_guard lock(queue->mutex);
    queue->jobs.erase(due);
  };
}

void WorkQueue::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(queue_->mutex);
      queue_->wake.wait(lock, [this] { return queue_->stopping || !queue_->jobs.empty(); });
      if (queue_->stopping) return;
      job = std::move(queue_->jobs.begin()->second);
      queue_->jobs.erase(queue_->jobs.begin());
    }
    job();
  }
}

}  // namespace conveyor::http
