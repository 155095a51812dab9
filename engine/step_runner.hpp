// What the executor actor runs: a StepPlan in, sampled tokens out.
//
// StepRunner is the seam between the engine and a backend (backends/backend.hpp
// builds one per device). A runner owns what a step needs: the weights, the
// KV pool (shared with the swap engine), one Sampler per sequence, and each
// sequence's last sample. Two are built: CpuStepRunner
// (backends/cpu/cpu_step_runner.hpp), and CudaStepRunner
// (backends/cuda/cuda_runner.hpp) where CUDA is compiled in; tests also use a
// fake. A runner is used from one thread at a time (the executor actor's).
#pragma once

#include <functional>

#include "base/status.hpp"
#include "engine/engine_types.hpp"

namespace conveyor {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Runs one iteration: block copies, the forward pass, sampling. A plan
  // built while the previous step ran holds a placeholder (-1) where that
  // step's sample goes, always as a sequence's last token: the runner fills
  // it with the sequence's last sample, which it keeps (HostSampling's
  // SampleMemory, or on a device the previous step's sampled ids).
  virtual StepResult run(StepPlan& plan) = 0;
  // Forgets every sequence (samplers, last samples, steps launched and not
  // finished): after an engine fault the scheduler recomputes them from
  // their tokens, with new samplers that replay their history
  // (StepPlan::new_sampler_history). Called only while no step runs; run()
  // or launch() may have thrown half-way through the last one.
  virtual void reset() = 0;
  // After reset(): ok when the runner can run steps again; an error when it
  // never can in this process (a CUDA context lost to a sticky error,
  // backends/cuda/cuda_sticky.hpp). The engine then stops with this error
  // rather than restarting into the same failure.
  virtual Status usable() const { return Status::ok(); }
  // Whether run() scores the prompt positions a plan asks for
  // (StepPlan::score, for prompt logprobs). A runner that does not is never
  // given such a plan: the scheduler refuses those requests at submit.
  virtual bool scores_prompts() const { return false; }
  // Whether run() verifies drafts (engine/speculation.hpp): a span whose
  // want_logits counts k + 1 rows is sampled row by row while the samples
  // equal the span's next tokens, so its sequence gets 1 to k + 1 tokens.
  // The engine refuses speculative decoding with a runner that does not.
  virtual bool verifies_drafts() const { return false; }
  // Whether run() writes the drafts a plan marks kModelDraft with a draft
  // model of its own (SpeculativeMethod::draft) before verifying them. The
  // engine refuses the draft method with a runner that does not.
  virtual bool drafts_with_model() const { return false; }

  // A pipelined runner (the CUDA runner) also takes a step in two halves, so
  // that the executor can queue the next step's device work before it
  // brings the previous step's samples back: launch() queues a step and
  // returns before its work ends, finish() waits for the oldest launched
  // step and returns its result, in launch order. A plan launched while the
  // previous step is unfinished gets that step's samples in its
  // placeholders on the device. run() is launch() then finish(). Runners
  // that are not pipelined only have run().
  virtual bool pipelined() const { return false; }
  virtual void launch(StepPlan& plan);  // may move the plan's contents away
  // Whether finish() would return without waiting.
  virtual bool ready() { return true; }
  virtual StepResult finish();
  // A pipelined runner that can say when a launched step's work is done
  // calls `callback` then, once per step, from any thread (it must not
  // block), and returns true; the executor then waits for that call
  // instead of polling ready() (which spins a core). It replaces any
  // earlier callback. Runners that cannot return false (the default).
  virtual bool set_ready_callback(std::function<void()> callback) {
    (void)callback;
    return false;
  }
};

}  // namespace conveyor
