#include "http/embedding_worker.hpp"

#include <algorithm>

namespace conveyor::http {

EmbeddingWorker::EmbeddingWorker(std::shared_ptr<Embedder> embedder) : embedder_(std::move(embedder)) {}

EmbeddingWorker::~EmbeddingWorker() {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->stopping = true;
    queue_->jobs.clear();
  }
  queue_->wake.notify_one();
  if (thread_.joinable()) thread_.join();
}

std::function<void()> EmbeddingWorker::submit(std::vector<std::vector<int32_t>> inputs, Pooling pooling, Done done) {
  uint64_t id = 0;
  {
    std::lock_guard lock(queue_->mutex);
    id = queue_->next_id++;
    queue_->jobs.push_back(Job{id, std::move(inputs), pooling, std::move(done)});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  queue_->wake.notify_one();
  return [weak = std::weak_ptr<Queue>(queue_), id] {
    const auto queue = weak.lock();
    if (!queue) return;
    std::lock_guard lock(queue->mutex);
    std::erase_if(queue->jobs, [id](const Job& j) { return j.id == id; });
  };
}

void EmbeddingWorker::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(queue_->mutex);
      queue_->wake.wait(lock, [this] { return queue_->stopping || !queue_->jobs.empty(); });
      if (queue_->stopping) return;
      job = std::move(queue_->jobs.front());
      queue_->jobs.pop_front();
    }
    job.done(embedder_->embed(job.inputs, job.pooling));
  }
}

}  // namespace conveyor::http
