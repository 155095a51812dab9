// Threads for the server's work that must not run on an Asio I/O thread,
// which would stall every connection it serves meanwhile: computing
// embeddings (engine/embedder.hpp: milliseconds to seconds of the model) and
// planning requests (http/request_plan.hpp: a chat template, the tokenizer,
// and a grammar to compile for a JSON schema or tools, up to a second for a
// schema of thousands of properties).
//
// Jobs run in the order they were submitted, one at a time on each of the
// queue's threads, which start with the first job. A job cancelled before it
// starts is dropped (its client went away); one that has started runs to
// its end, and its own code decides whether anyone still wants its result.
//
// Thread-safety: submit() and the cancel functions may be called from any
// thread, the cancel functions after the queue is gone too. The destructor
// lets the running jobs finish, drops the queued ones and joins; it must not
// run on one of the queue's threads (so a job must not hold the last
// reference to the queue's owner).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
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

  // Queues `job`; the returned function drops it if it has not started (any
  // thread, any number of times).
  std::function<void()> submit(std::function<void()> job);

 private:
  struct Job {
    uint64_t id = 0;
    std::function<void()> run;
  };
  // Shared with the cancel functions, which may outlive the queue.
  struct Queue {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<Job> jobs;
    uint64_t next_id = 1;
    bool stopping = false;
  };
  void run();

  const int max_threads_;
  const std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::vector<std::thread> threads_;  // one more with each job, up to max_threads_ (under queue_->mutex)
};

}  // namespace conveyor::http
