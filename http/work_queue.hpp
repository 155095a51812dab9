// Threads for the server's work that must not run on an Asio I/O thread,
// which would stall every connection it serves meanwhile: computing
// embeddings (engine/embedder.hpp: milliseconds to seconds of the model) and
// planning requests (http/request_plan.hpp: a chat template, the tokenizer,
// and a grammar to compile for a JSON schema or tools, up to a second for a
// schema of thousands of properties).
//
// Jobs run in the order they are due, one at a time on each of the queue's
// threads, which start with the first job. A job is due when it was
// submitted plus how long it is expected to run (0 unless told: then jobs
// run in the order they came; at most kMaxExpected), so a short job passes
// long ones queued shortly before it, and a long one is passed only by jobs
// submitted within its expected time after it. A job cancelled before it
// starts is dropped (its client went away); one that has started runs to its
// end, and its own code decides whether anyone still wants its result.
//
// Thread-safety: submit() and the cancel functions may be called from any
// thread, the cancel functions after the queue is gone too. The destructor
// lets the running jobs finish, drops the queued ones and joins; it must not
// run on one of the queue's threads (so a job must not hold the last
// reference to the queue's owner).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace conveyor::http {

class WorkQueue {
 public:
  explicit WorkQueue(int threads = 1);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  static constexpr std::chrono::hours kMaxExpected{1};

  // Queues `job`, expected to run for `expected`; the returned function
  // drops it if it has not started (any thread, any number of times).
  std::function<void()> submit(std::function<void()> job, std::chrono::nanoseconds expected = {});

 private:
  // When a job is due, then the order of submission.
  using Due = std::pair<std::chrono::steady_clock::time_point, uint64_t>;
  // Shared with the cancel functions, which may outlive the queue.
  struct Queue {
    std::mutex mutex;
    std::condition_variable wake;
    std::map<Due, std::function<void()>> jobs;
    uint64_t next_id = 1;
    bool stopping = false;
  };
  void run();

  const int max_threads_;
  const std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::vector<std::thread> threads_;  // one more with each job, up to max_threads_ (under queue_->mutex)
};

}  // namespace conveyor::http
