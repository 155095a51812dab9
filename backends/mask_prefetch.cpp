#include "backends/mask_prefetch.hpp"

#include "model/sampling/sampler.hpp"

namespace conveyor {

MaskPrefetch::MaskPrefetch() : worker_([this] { run(); }) {}

MaskPrefetch::~MaskPrefetch() {
  finish();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

// Claims are made under the lock (a mask takes far longer than that), so a
// claim never reaches past a job into the next one.
bool MaskPrefetch::prepare_next(bool worker) {
  Sampler* sampler = nullptr;
  {
    std::lock_guard lock(mu_);
    if (next_ >= job_.size()) return false;
    sampler = job_[next_++];
  }
  sampler->prepare_mask();
  if (worker) by_worker_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  if (++done_ == job_.size()) idle_.notify_all();
  return true;
}

void MaskPrefetch::run() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    while (prepare_next(true)) {
    }
  }
}

void MaskPrefetch::start(std::vector<Sampler*> samplers) {
  finish();
  if (samplers.empty()) return;
  {
    std::lock_guard lock(mu_);
    job_ = std::move(samplers);
    next_ = 0;
    done_ = 0;
    ++generation_;
  }
  wake_.notify_one();
}

void MaskPrefetch::finish() {
  while (prepare_next(false)) {
  }
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return done_ == job_.size(); });
  job_.clear();
  done_ = 0;
  next_ = 0;
}

}  // namespace conveyor
