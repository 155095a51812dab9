// The CUDA backend's runner and swap engine (backends/backend.hpp's
// make_cuda_backend builds them). Built only where CUDA is compiled in
// (CONVEYOR_CUDA); this header includes nothing from CUDA.
//
// CudaStepRunner: the weights live on the device as bf16 (any stored type is
// decoded and rounded at upload, model/bf16_pack.hpp), products run
// through cuBLAS in bf16 with float32 accumulation, everything else through
// kernels/cuda on one compute stream. A step uploads its plan's arrays in one
// copy, runs copy-on-write block copies and the forward pass, and then either
// samples on the device and brings back only the ids (when every row can be:
// Sampler::device_samplable, no logprobs; the host sends each row's
// parameters, penalty tokens and one uniform from its generator) or
// brings back the logits rows and samples them on the host with the
// sequences' Samplers, exactly as the CPU runner does.
//
// It is pipelined (StepRunner::launch and finish): a step launched while the
// previous one is unfinished is queued on the stream behind it, its
// placeholders filled, and its penalties counting, the previous step's ids
// on the device, unless that step was sampled on the host (then it waits
// for it first). finish() returns once a step's work on the device is
// done, so the swap engine may copy any block the scheduler names after
// its result.
// A verify step (speculative decoding: a span with drafts, whose want_logits
// counts k + 1 rows) is sampled on the host, row after row as the CPU runner
// does (backends/host_sampling.hpp), and completed before the next step is
// queued, since the scheduler plans no step ahead of one that drafts.
// A step that scores prompt positions (StepPlan::score, for prompt
// logprobs) is sampled on the host and completed before the next step is
// queued: its last layer's output is still on the device then, and each pass
// of rows (backends/prompt_scoring.hpp) runs the final norm and the
// classifier there and brings the logits back to be scored on the host.
//
// CudaSwapEngine: copies between the device pool and a pinned host pool on
// one stream per direction, never on the compute stream; a waiter thread
// reports each order when its end event has fired, with the copy time the
// events measured.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/step_runner.hpp"
#include "engine/swap_engine.hpp"
#include "backends/host_sampling.hpp"
#include "model/config.hpp"
#include "model/kv_cache.hpp"
#include "base/status.hpp"
#include "model/weights.hpp"

namespace conveyor {

namespace cuda {
class Timeline;      // backends/cuda/cuda_util.hpp
struct DeviceModel;  // backends/cuda/cuda_forward.hpp
}

// The largest step the runner's memory is allocated for at start-up, before
// the KV pool is sized from what is left: the activations, attention's
// workspace, the plan's ints and the sampling inputs at their maximum for
// these limits, so that no step grows them after the pool took its share
// (a step past them would grow them, which may fail for want of memory).
struct CudaStepLimits {
  int32_t max_tokens = 2048;   // tokens in one step (--max-batched-tokens)
  int32_t max_rows = 256;      // logits rows in one step
  int32_t max_seqs = 256;      // sequences in one step (--max-num-seqs)
  int32_t max_context = 4096;  // the longest context (the model's context length)
  int32_t block_size = 16;     // KV positions a block (block tables' length)
};

class CudaStepRunner final : public StepRunner {
 public:
  // Uploads the weights to device `device` and allocates the activation
  // memory for `limits`; an error names what failed (out of device memory).
  static Expected<std::unique_ptr<CudaStepRunner>> create(int32_t device, const ModelConfig& config,
                                                          ModelWeights weights, const CudaStepLimits& limits);
  ~CudaStepRunner() override;

  // The KV pool (device memory, backends/cuda/cuda_memory.hpp), before the first run().
  void attach(std::shared_ptr<KvCache> kv);
  // Device bytes of the uploaded weights.
  int64_t weight_bytes() const;
  // The weights on the device, for an embedder to share (read-only).
  std::shared_ptr<const cuda::DeviceModel> device_model() const;

  StepResult run(StepPlan& plan) override;  // only with no step launched and unfinished
  // Also finds whether the fault lost the CUDA context (a sticky error,
  // cuda_sticky.hpp): then usable() says so and every later step throws it.
  void reset() override;
  Status usable() const override;
  bool scores_prompts() const override { return true; }
  bool verifies_drafts() const override { return true; }
  bool pipelined() const override;
  void launch(StepPlan& plan) override;
  bool ready() override;
  StepResult finish() override;
  // Called after each launched step's work, from CUDA's callback thread.
  bool set_ready_callback(std::function<void()> callback) override;
  // Records each step's device work from now on (benchmarks; null: stop).
  void set_timeline(std::shared_ptr<cuda::Timeline> timeline);

 private:
  struct Impl;
  explicit CudaStepRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class CudaSwapEngine final : public SwapEngine {
 public:
  // `device_pool` in device memory; `host_pool` of the same shape (any block
  // count) in pinned host memory.
  CudaSwapEngine(int32_t device, std::shared_ptr<KvCache> device_pool, std::shared_ptr<KvCache> host_pool);
  ~CudaSwapEngine() override;  // waits for the orders in flight
  void submit(const SwapOrder& order, Done done) override;
  // Records each order's copies from now on (benchmarks; null: stop).
  void set_timeline(std::shared_ptr<cuda::Timeline> timeline);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
