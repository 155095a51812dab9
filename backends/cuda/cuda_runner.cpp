// CudaStepRunner (backends/cuda/cuda_runner.hpp): steps of the forward pass
// (backends/cuda/cuda_forward.hpp) on a device, pipelined, and their sampling.
#include "backends/cuda/cuda_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_forward.hpp"
#include "backends/cuda/cuda_sticky.hpp"
#include "backends/cuda/cuda_util.hpp"
#include "backends/prompt_scoring.hpp"
#include "kernels/cuda/kernels.hpp"

namespace conveyor {

using cuda::check;
using cuda::DeviceBuffer;
using cuda::PinnedBuffer;
using cuda::StepInts;

namespace {

// cuda_sticky.hpp lists plain codes: they are these.
static_assert(cudaErrorContained == 226 && cudaErrorIllegalAddress == 700 && cudaErrorLaunchTimeout == 702 &&
              cudaErrorAssert == 710 && cudaErrorHardwareStackError == 714 && cudaErrorIllegalInstruction == 715 &&
              cudaErrorMisalignedAddress == 716 && cudaErrorInvalidAddressSpace == 717 &&
              cudaErrorInvalidPc == 718 && cudaErrorLaunchFailure == 719 && cudaErrorTensorMemoryLeak == 721 &&
              cudaErrorMpsClientTerminated == 810 && cudaErrorExternalDevice == 911);

// The most int32s a step's plan uploads (cuda::StepInts) for `limits`:
// tokens and positions 2T, logits rows R, per sequence its token_begin,
// start_pos, table_begin (3S + 2), its block table (at most a context's
// blocks), a copy-on-write pair and a placeholder fill (2 + 2 each).
size_t max_step_ints(const CudaStepLimits& limits, int32_t context) {
  const size_t t = size_t(std::max(limits.max_tokens, 1)), r = size_t(std::max(limits.max_rows, 1));
  const size_t s = size_t(std::max(limits.max_seqs, 1));
  const size_t blocks = size_t((context + std::max(limits.block_size, 1) - 1) / std::max(limits.block_size, 1));
  return 2 * t + r + 3 * s + 2 + s * blocks + 4 * s;
}

// The most bytes of sampling inputs (sample_on_device's layout) for `rows`
// rows: per row a uniform, six floats and four ints, and its penalty lists
// (seen tokens; generated tokens and their counts), each at most a context.
// 12 bytes a row a position: 25 MB for 256 rows of 8192 positions.
size_t max_sampling_input_bytes(int32_t rows, int32_t context) {
  const size_t r = size_t(std::max(rows, 1)), c = size_t(std::max(context, 1));
  return r * sizeof(double) + 6 * r * sizeof(float) + (4 * r + 2 + 3 * r * c) * sizeof(int32_t);
}

}  // namespace

struct CudaStepRunner::Impl {
  int32_t device = 0;
  ModelConfig c;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;

  std::shared_ptr<const cuda::DeviceModel> model;  // shared with the embedder
  // Activations, sized for CudaStepLimits and grown when a step needs more.
  std::unique_ptr<cuda::Forward> fwd;
  DeviceBuffer ints, sampling_in;
  PinnedBuffer host_logits;
  DeviceBuffer score_rows;  // a scoring pass's token rows (score_prompts)
  // Per launched step, two in turn: the step after a launched one writes
  // the other, while the first one's upload may still be queued and its
  // samples still on their way (picks: the device's ids).
  struct Slot {
    DeviceBuffer picks;
    PinnedBuffer host_ints, host_picks, host_sampling_in;
    cudaEvent_t begin = nullptr, end = nullptr;  // around the step's work on the stream
  };
  Slot slots[2];
  HostSampling::DeviceInputs device_inputs;
  HostSampling::Fills fills;

  // Launched steps not yet finished, oldest first: two at most unfinished.
  struct Flight {
    StepPlan plan;
    Slot* slot = nullptr;
    // Sampled on the device (or no rows): any ids are in its slot's picks.
    // Never for a step that scores prompt positions: the next step waits for
    // it to complete, so that its activations are still there to score.
    bool on_device = false;
    bool done = false;       // waited for and sampled: `result` is final
    StepResult result;
  };
  std::deque<Flight> flights;
  int next_slot = 0;

  std::shared_ptr<KvCache> kv;
  HostSampling sampling;
  std::string lost;  // set by reset() once a sticky error has lost the context: why
  // The executor's ready callback (set_ready_callback), called from CUDA's
  // callback thread after each step's work: the mutex orders a replacement
  // (an engine restart's new executor) with a call in progress.
  std::mutex ready_mutex;
  std::function<void()> on_ready;
  // Queued behind each step's end event. cudaStreamAddCallback, not
  // cudaLaunchHostFunc: it runs (with the error) after a device error too,
  // so the executor hears of a failed step instead of waiting for ever.
  static void CUDART_CB step_done(cudaStream_t, cudaError_t, void* impl) {
    Impl& m = *static_cast<Impl*>(impl);
    std::function<void()> call;
    {
      std::lock_guard lock(m.ready_mutex);
      call = m.on_ready;
    }
    if (call) call();
  }
  std::shared_ptr<cuda::Timeline> timeline;  // null unless a benchmark asks

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);
    for (Slot& s : slots) {
      if (s.begin) cudaEventDestroy(s.begin);
      if (s.end) cudaEventDestroy(s.end);
    }
    if (blas) cublasDestroy(blas);
    if (stream) cudaStreamDestroy(stream);
  }

  // Grows a device buffer that queued work may use: only once the stream
  // is idle (every launched step is waited for and sampled first).
  void grow(DeviceBuffer& b, size_t bytes) {
    if (bytes <= b.bytes()) return;
    settle();
    b.reserve(bytes);
  }

  void reserve(int32_t tokens, int32_t rows, int32_t max_context) {
    const size_t r = size_t(std::max(rows, 1));
    if (!fwd->fits(tokens, rows, max_context)) {
      settle();
      fwd->reserve(tokens, rows, max_context);
    }
    for (Slot& s : slots) {
      if (r * sizeof(int32_t) > s.host_picks.bytes()) settle();  // a queued download may write it
      s.host_picks.reserve(r * sizeof(int32_t));
      grow(s.picks, r * sizeof(int32_t));
    }
  }

  void launch(StepPlan& plan);
  // The logits of a completed step's token rows `rows` (at most
  // kScoredRowsPerPass), from the last layer's output that is still in x:
  // the final norm and the classifier, as the step's own logits rows.
  // Synchronous; only while no later work is queued.
  void row_logits(std::span<const int32_t> rows, std::vector<float>& out);
  // Waits for a launched step's work and samples it (host sampling, or the
  // device's ids recorded); flights complete in launch order.
  void complete(Flight& f);
  // Completes every unfinished flight and waits for the stream.
  void settle();
  // previous_picks: the previous step's ids on the device, which
  // device_inputs.previous_row points into (null when not launched ahead).
  void sample_on_device(Slot& slot, int32_t rows, const int32_t* previous_picks);
};

// Uploads device_inputs in one copy and samples the logits rows into
// `picks`: penalties (when a row has one), then greedy or a draw with the
// row's uniform after its top-k, top-p and min-p (kernels/cuda/sampling.cu).
void CudaStepRunner::Impl::sample_on_device(Slot& slot, int32_t rows, const int32_t* previous_picks) {
  const HostSampling::DeviceInputs& in = device_inputs;
  // Layout: doubles first (uniforms), then floats, then ints.
  constexpr size_t kFloats = 6, kInts = 7;
  const size_t r = size_t(rows);
  const size_t floats_at = r * sizeof(double), ints_at = floats_at + kFloats * r * sizeof(float);
  const std::vector<int32_t>* ints[kInts] = {&in.top_k,     &in.seen_begin, &in.seen,        &in.gen_begin,
                                             &in.generated, &in.gen_counts, &in.previous_row};
  size_t bytes = ints_at;
  for (const auto* v : ints) bytes += v->size() * sizeof(int32_t);
  slot.host_sampling_in.reserve(bytes);
  grow(sampling_in, bytes);
  std::byte* h = slot.host_sampling_in.get<std::byte>();
  std::memcpy(h, in.uniforms.data(), r * sizeof(double));
  const std::vector<float>* floats[kFloats] = {&in.temperature, &in.min_p,     &in.top_p,
                                               &in.repetition,  &in.frequency, &in.presence};
  for (size_t i = 0; i < kFloats; ++i)
    std::memcpy(h + floats_at + i * r * sizeof(float), floats[i]->data(), r * sizeof(float));
  size_t at = ints_at;
  const int32_t* d_ints[kInts];
  std::byte* d = sampling_in.get<std::byte>();
  for (size_t i = 0; i < kInts; ++i) {
    if (!ints[i]->empty()) std::memcpy(h + at, ints[i]->data(), ints[i]->size() * sizeof(int32_t));
    d_ints[i] = reinterpret_cast<const int32_t*>(d + at);
    at += ints[i]->size() * sizeof(int32_t);
  }
  check(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream), "upload sampling inputs");
  const float* f = reinterpret_cast<const float*>(d + floats_at);
  float* l = fwd->logits();
  if (in.penalties)
    check(kernels::cuda::apply_penalties(l, rows, c.vocab_size,
                                         kernels::cuda::RowPenalties{f + 3 * r, f + 4 * r, f + 5 * r, d_ints[1],
                                                                     d_ints[2], d_ints[3], d_ints[4], d_ints[5],
                                                                     d_ints[6], previous_picks},
                                         stream),
          "apply_penalties");
  const kernels::cuda::RowSampling params{f, f + r, d_ints[0], f + 2 * r, reinterpret_cast<const double*>(d)};
  check(kernels::cuda::sample_rows(l, rows, c.vocab_size, params, slot.picks.get<int32_t>(), stream), "sample_rows");
}

CudaStepRunner::CudaStepRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaStepRunner::~CudaStepRunner() = default;

Expected<std::unique_ptr<CudaStepRunner>> CudaStepRunner::create(int32_t device, const ModelConfig& config,
                                                                 ModelWeights weights, const CudaStepLimits& limits) {
  auto m = std::make_unique<Impl>();
  m->device = device;
  m->c = config;
  // The device runs the forward pass while the host thread waits: constrained
  // rows' next masks are computed then (HostSampling::prefetch_masks).
  m->sampling.prefetch_masks(true);
  try {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasCreate(&m->blas), "cublasCreate");
    check(cublasSetStream(m->blas, m->stream), "cublasSetStream");
    for (Impl::Slot& slot : m->slots) {
      check(cudaEventCreate(&slot.begin), "cudaEventCreate");
      // Blocking sync: complete() sleeps in cudaEventSynchronize until the
      // step's work is done instead of spinning a core for the whole step.
      // The driver's wake-up adds some microseconds to each wait (its cost
      // against spinning has not been measured: no GPU was at hand).
      check(cudaEventCreateWithFlags(&slot.end, cudaEventBlockingSync), "cudaEventCreate");
    }
    m->model = std::make_shared<const cuda::DeviceModel>(config, weights);
    m->fwd = std::make_unique<cuda::Forward>(m->model, m->stream, m->blas);
    // Everything a step can need, before the caller measures what is left
    // for the KV pool: attention's workspace has a bound whatever the
    // context (kernels/cuda/attention_math.hpp), the ints and sampling
    // inputs are sized for the longest context.
    const int32_t context = std::clamp(limits.max_context, 1, std::max(config.context_length, 1));
    // Logits rows: a step's, or a pass of prompt scoring's (complete()).
    const int32_t rows = std::max(limits.max_rows, kScoredRowsPerPass);
    m->reserve(std::max(limits.max_tokens, rows), rows, context);
    m->grow(m->ints, max_step_ints(limits, context) * sizeof(int32_t));
    m->grow(m->sampling_in, max_sampling_input_bytes(limits.max_rows, context));
    // The uploads (cudaMemcpy from pageable memory) ran on the legacy
    // default stream, which the runner's non-blocking stream does not wait
    // for, and may still be landing when cudaMemcpy returns: wait for them.
    check(cudaDeviceSynchronize(), "weight upload");
    // One product of the largest batch, so that cuBLAS has made its own
    // workspace before the caller measures the memory left for the KV pool.
    m->fwd->gemm(m->model->classifier, config.vocab_size, config.dim, m->fwd->xb(), std::max(limits.max_rows, 1),
                 m->fwd->logits(), config.vocab_size, false);
    check(cudaStreamSynchronize(m->stream), "warm-up product");
  } catch (const std::exception& e) {
    return make_error(Errc::unsupported, std::string("--device cuda:") + std::to_string(device) + ": " + e.what());
  }
  return std::unique_ptr<CudaStepRunner>(new CudaStepRunner(std::move(m)));
}

void CudaStepRunner::attach(std::shared_ptr<KvCache> kv) { impl_->kv = std::move(kv); }

int64_t CudaStepRunner::weight_bytes() const { return impl_->model->bytes; }

std::shared_ptr<const cuda::DeviceModel> CudaStepRunner::device_model() const { return impl_->model; }

void CudaStepRunner::reset() {
  Impl& m = *impl_;
  cudaSetDevice(m.device);
  // Their errors, if any, were the fault's. A sticky one shows in both (and
  // in every call from now on); any other is cleared by reading it.
  const cudaError_t synced = cudaStreamSynchronize(m.stream), last = cudaGetLastError();
  for (const cudaError_t e : {synced, last})
    if (m.lost.empty() && sticky_cuda_error(e))
      m.lost = "--device cuda:" + std::to_string(m.device) + ": the CUDA context is lost (" + cudaGetErrorString(e) +
               ", error " + std::to_string(int(e)) +
               "): CUDA allows no recovery in this process, every later call fails the same way; "
               "the engine stops, restart conveyor";
  m.flights.clear();
  m.sampling.clear();
}

Status CudaStepRunner::usable() const {
  if (impl_->lost.empty()) return Status::ok();
  return make_error(Errc::internal, impl_->lost);
}

void CudaStepRunner::set_timeline(std::shared_ptr<cuda::Timeline> timeline) { impl_->timeline = std::move(timeline); }

bool CudaStepRunner::pipelined() const { return true; }

// The executor then sleeps between steps instead of polling ready() in a
// loop. Expected cost: the callback holds the stream for as long as it
// takes (a CAF message send, microseconds), and CUDA's callback thread
// wakes once per step; against a polling loop that kept a core busy. Not
// measured: no GPU was at hand (gpu-check.sh's runner_bench would show it).
bool CudaStepRunner::set_ready_callback(std::function<void()> callback) {
  std::lock_guard lock(impl_->ready_mutex);
  impl_->on_ready = std::move(callback);
  return true;
}

StepResult CudaStepRunner::run(StepPlan& plan) {
  launch(plan);
  return finish();
}

void CudaStepRunner::launch(StepPlan& plan) {
  if (!impl_->lost.empty()) throw std::runtime_error(impl_->lost);
  check(cudaSetDevice(impl_->device), "cudaSetDevice");  // the executor's thread, not the creator's
  impl_->launch(plan);
}

bool CudaStepRunner::ready() {
  Impl& m = *impl_;
  if (m.flights.empty() || m.flights.front().done) return true;
  const cudaError_t e = cudaEventQuery(m.flights.front().slot->end);
  if (e == cudaErrorNotReady) return false;
  check(e, "step");
  return true;
}

StepResult CudaStepRunner::finish() {
  Impl& m = *impl_;
  if (m.flights.empty()) throw std::logic_error("CudaStepRunner::finish: no step was launched");
  check(cudaSetDevice(m.device), "cudaSetDevice");
  Impl::Flight& f = m.flights.front();
  if (!f.done) m.complete(f);
  StepResult result = std::move(f.result);
  m.flights.pop_front();
  return result;
}

void CudaStepRunner::Impl::complete(Flight& f) {
  check(cudaEventSynchronize(f.slot->end), "step");
  const auto start = std::chrono::steady_clock::now();
  if (f.on_device)
    sampling.accept(f.plan, f.slot->host_picks.get<int32_t>(), f.result);
  else
    sampling.sample(f.plan, host_logits.get<float>(), c.vocab_size, f.result);
  if (!f.plan.score.empty())
    score_prompts(f.plan, c.vocab_size,
                  [this](std::span<const int32_t> rows, std::vector<float>& out) { row_logits(rows, out); }, f.result);
  float device_ms = 0.0f;
  check(cudaEventElapsedTime(&device_ms, f.slot->begin, f.slot->end), "cudaEventElapsedTime");
  f.result.forward_seconds =
      double(device_ms) * 1e-3 + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  f.done = true;
}

void CudaStepRunner::Impl::row_logits(std::span<const int32_t> rows, std::vector<float>& out) {
  const auto n = int32_t(rows.size());
  const size_t vocab = size_t(c.vocab_size), bytes = size_t(n) * vocab * sizeof(float);
  // Sized at creation for kScoredRowsPerPass rows: nothing grows here.
  if (fwd->final_x_bytes() < size_t(n) * size_t(c.dim) * sizeof(float) || fwd->logits_bytes() < bytes)
    throw std::logic_error("CUDA runner: a scoring pass has more rows than its buffers");
  if (score_rows.bytes() < size_t(n) * sizeof(int32_t)) score_rows.reserve(size_t(kScoredRowsPerPass) * sizeof(int32_t));
  check(cudaMemcpyAsync(score_rows.get(), rows.data(), size_t(n) * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
        "upload scored rows");
  fwd->classify(score_rows.get<int32_t>(), n);
  host_logits.reserve(bytes);
  check(cudaMemcpyAsync(host_logits.get(), fwd->logits(), bytes, cudaMemcpyDeviceToHost, stream), "download logits");
  check(cudaStreamSynchronize(stream), "scoring pass");
  const float* h = host_logits.get<float>();
  out.assign(h, h + size_t(n) * vocab);
}

void CudaStepRunner::Impl::settle() {
  for (Flight& f : flights)
    if (!f.done) complete(f);
  check(cudaStreamSynchronize(stream), "step");
}

void CudaStepRunner::Impl::launch(StepPlan& plan) {
  // At most one launched step stays unfinished ahead of this one.
  for (Flight& f : flights)
    if (!f.done && &f != &flights.back()) complete(f);
  const ForwardBatch& b = plan.batch;
  const int32_t n = b.num_tokens(), n_seqs = b.num_seqs();
  int32_t rows = 0, max_context = 1;
  bool verifies = false;  // a span with drafts: its rows are sampled on the host, one after another
  for (int32_t s = 0; s < n_seqs; ++s) {
    const int32_t len = b.seq_token_begin[s + 1] - b.seq_token_begin[s];
    if (len > 0) max_context = std::max(max_context, b.seq_start_pos[s] + len);
    if (len > 0) rows += std::min(int32_t(b.want_logits[s]), len);
    verifies = verifies || b.want_logits[s] > 1;
  }
  // Before anything of this step is queued: room for it (the ints with a
  // fill for every sequence at most).
  reserve(n, rows, max_context);
  grow(ints, StepInts(b, rows, plan.copies.size(), size_t(n_seqs)).total * sizeof(int32_t));

  // The previous step's samples: on the device, this step's placeholders
  // and penalties take them there; sampled on the host, this step waits.
  Flight* previous = !flights.empty() && !flights.back().done ? &flights.back() : nullptr;
  const bool ahead = previous != nullptr && previous->on_device;
  if (ahead) {
    sampling.begin_ahead(plan, previous->plan, fills);
  } else {
    if (previous != nullptr) complete(*previous);
    fills.clear();
    sampling.begin(plan);
  }

  Slot& slot = slots[next_slot];
  next_slot ^= 1;
  const StepInts at(b, rows, plan.copies.size(), fills.size());
  slot.host_ints.reserve(at.total * sizeof(int32_t));
  int32_t* h = slot.host_ints.get<int32_t>();
  at.put(b, h);
  for (size_t i = 0; i < plan.copies.size(); ++i) {
    h[at.pairs + 2 * i] = plan.copies[i].first;
    h[at.pairs + 2 * i + 1] = plan.copies[i].second;
  }
  for (size_t i = 0; i < fills.size(); ++i) {
    h[at.fills + 2 * i] = fills[i].first;
    h[at.fills + 2 * i + 1] = fills[i].second;
  }
  int32_t* d = ints.get<int32_t>();
  check(cudaEventRecord(slot.begin, stream), "cudaEventRecord");
  cudaEvent_t began = nullptr, ended = nullptr;
  if (timeline) {
    check(cudaEventCreate(&began), "cudaEventCreate");
    check(cudaEventCreate(&ended), "cudaEventCreate");
    check(cudaEventRecord(began, stream), "cudaEventRecord");
  }
  if (at.total > 0)
    check(cudaMemcpyAsync(d, h, at.total * sizeof(int32_t), cudaMemcpyHostToDevice, stream), "upload plan");
  if (!fills.empty())
    check(kernels::cuda::fill_tokens(d + at.tokens, d + at.fills, int32_t(fills.size()),
                                     previous->slot->picks.get<int32_t>(), stream),
          "fill_tokens");
  if (!plan.copies.empty())
    check(kernels::cuda::copy_blocks(kv->block_data(0), int64_t(kv->shape().block_bytes()), d + at.pairs,
                                     int32_t(plan.copies.size()), stream),
          "copy_blocks");
  if (n > 0) fwd->run(b, d, at, max_context, rows, *kv);

  Flight f;
  f.slot = &slot;
  f.result.iteration = plan.iteration;
  // Sampled on the device, the ids stay there for the next step; a step
  // without logits rows has none to wait for either.
  f.on_device = plan.score.empty() && !verifies && (rows == 0 || sampling.device_inputs(plan, device_inputs));
  if (rows > 0 && f.on_device) {
    if (device_inputs.uniforms.size() != size_t(rows))  // a want_logits span without tokens: never planned
      throw std::runtime_error("CUDA runner: the plan's logits rows and its samplers disagree");
    sample_on_device(slot, rows, ahead ? previous->slot->picks.get<int32_t>() : nullptr);
  }
  if (timeline) {
    check(cudaEventRecord(ended, stream), "cudaEventRecord");
    timeline->add(cuda::Timeline::Lane::compute, began, ended);
  }
  if (rows > 0 && f.on_device) {
    check(cudaMemcpyAsync(slot.host_picks.get(), slot.picks.get(), size_t(rows) * sizeof(int32_t),
                          cudaMemcpyDeviceToHost, stream),
          "download tokens");
  } else if (!f.on_device && rows > 0) {
    // No unfinished step reads it: one sampled on the host is completed before the next launches.
    const size_t bytes = size_t(rows) * size_t(c.vocab_size) * sizeof(float);
    host_logits.reserve(bytes);
    check(cudaMemcpyAsync(host_logits.get(), fwd->logits(), bytes, cudaMemcpyDeviceToHost, stream),
          "download logits");
  }
  check(cudaEventRecord(slot.end, stream), "cudaEventRecord");
  check(cudaStreamAddCallback(stream, &Impl::step_done, this, 0), "cudaStreamAddCallback");
  f.plan = std::move(plan);
  flights.push_back(std::move(f));
}

}  // namespace conveyor
