// Grammar masks computed off the critical path: after a step's tokens are
// sampled, the matchers of the constrained sequences stand at their next
// position, and one worker thread computes their next masks
// (Sampler::prepare_mask) while the next forward pass runs. Sampling then
// finds them ready, so a constrained row costs about what a free one does
// once its logits arrive.
//
//   start(samplers)  the worker begins on them (after a step's samples)
//   finish()         before anything touches a sampler again: the caller
//                    prepares those the worker has not reached, and waits
//                    for the one it is on
//
// Worth it where the forward pass leaves the host thread free (the CUDA
// runner); on the CPU the forward pass keeps every core busy, so the CPU
// runner computes masks on its own thread as part of sampling.
//
// Thread-safety: start() and finish() from one thread (the runner's); the
// samplers' shared grammar caches are thread-safe (grammar/matcher.hpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace conveyor {

class Sampler;

class MaskPrefetch {
 public:
  MaskPrefetch();
  ~MaskPrefetch();
  MaskPrefetch(const MaskPrefetch&) = delete;
  MaskPrefetch& operator=(const MaskPrefetch&) = delete;

  // Finishes any previous job, then hands `samplers` to the worker.
  void start(std::vector<Sampler*> samplers);
  void finish();
  // Masks prepared by the worker (not by finish()'s caller) so far.
  uint64_t prepared_by_worker() const { return by_worker_.load(std::memory_order_relaxed); }

 private:
  void run();
  // Prepares the job's next sampler; false when none is left.
  bool prepare_next(bool worker);

  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::vector<Sampler*> job_;  // under mu_
  size_t next_ = 0;      // under mu_: the next sampler to claim
  size_t done_ = 0;      // under mu_
  bool stop_ = false;    // under mu_
  uint64_t generation_ = 0;  // under mu_: a new job
  std::atomic<uint64_t> by_worker_{0};
  std::thread worker_;
};

}  // namespace conveyor
