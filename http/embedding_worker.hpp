// The thread on which the server computes embeddings (engine/embedder.hpp).
//
// An embedding runs the model for milliseconds to seconds: never on an Asio
// I/O thread, which would stall every connection it serves, and not through
// the scheduler either (the Embedder runs beside the engine's steps on the
// same weights). Jobs queue here and run one at a time, in order; the thread
// starts with the first job. A job cancelled before it starts is dropped
// (its client went away); one that has started runs to its end, and its
// result goes to its callback, which decides whether anyone still wants it.
//
// Thread-safety: submit() and the cancel functions may be called from any
// thread. Callbacks run on the worker thread. The destructor lets the running
// job finish, drops the queued ones without calling them, and joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/embedder.hpp"

namespace conveyor::http {

class EmbeddingWorker {
 public:
  using Vectors = std::vector<std::vector<float>>;
  using Done = std::function<void(Expected<Vectors>)>;

  explicit EmbeddingWorker(std::shared_ptr<Embedder> embedder);
  ~EmbeddingWorker();
  EmbeddingWorker(const EmbeddingWorker&) = delete;
  EmbeddingWorker& operator=(const EmbeddingWorker&) = delete;

  // Queues the embedding of `inputs`; the returned function drops the job if
  // it has not started (any thread, any number of times).
  std::function<void()> submit(std::vector<std::vector<int32_t>> inputs, Pooling pooling, Done done);

 private:
  struct Job {
    uint64_t id = 0;
    std::vector<std::vector<int32_t>> inputs;
    Pooling pooling = Pooling::last;
    Done done;
  };
  // Shared with the cancel functions, which may outlive the worker.
  struct Queue {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<Job> jobs;
    uint64_t next_id = 1;
    bool stopping = false;
  };
  void run();

  const std::shared_ptr<Embedder> embedder_;
  const std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  std::thread thread_;  // started by the first submit()
};

}  // namespace conveyor::http
