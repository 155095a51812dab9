#include "backends/cuda/cuda_embedder.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_forward.hpp"
#include "backends/cuda/cuda_memory.hpp"
#include "backends/cuda/cuda_util.hpp"

namespace conveyor {

using cuda::check;

struct CudaEmbedder::Impl {
  int32_t device = 0;
  std::shared_ptr<const cuda::DeviceModel> model;
  KvDtype kv_dtype = KvDtype::bf16;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  std::unique_ptr<cuda::Forward> fwd;
  std::shared_ptr<KvCache> kv;
  cuda::DeviceBuffer ints;
  std::vector<int32_t> host_ints, table;
  std::vector<float> hidden;  // [tokens, dim]: the batch's final hidden states
  ForwardBatch batch;

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);
    if (blas) cublasDestroy(blas);
    if (stream) cudaStreamDestroy(stream);
  }

  // Room for a pass of `tokens` tokens in `blocks` blocks, contexts up to
  // `max_context`; only while nothing of this embedder is queued.
  void reserve(int32_t tokens, int32_t blocks, int32_t max_context) {
    fwd->reserve(tokens, 0, max_context);
    if (kv && kv->shape().n_blocks >= blocks) return;
    kv.reset();
    auto made = KvCache::create(KvCacheShape::for_model(model->c, kBlockSize, blocks, kv_dtype),
                                cuda_device_allocator(device));
    if (!made) throw std::runtime_error("its KV cache: " + made.error().message);
    kv = std::move(made).value();
  }

  // Inputs [first, last) as one pass, their embeddings into out[first, last).
  void run_batch(const std::vector<std::vector<int32_t>>& inputs, size_t first, size_t last, Pooling pooling,
                 std::vector<std::vector<float>>& out) {
    const int32_t blocks = embedding_batch(inputs, first, last, kBlockSize, table, batch);
    int32_t longest = 0;
    for (size_t i = first; i < last; ++i) longest = std::max(longest, int32_t(inputs[i].size()));
    const int32_t n = batch.num_tokens(), dim = model->c.dim;
    reserve(n, blocks, longest);
    const cuda::StepInts at(batch, 0, 0, 0);
    host_ints.resize(at.total);
    at.put(batch, host_ints.data());
    ints.reserve(at.total * sizeof(int32_t));
    check(cudaMemcpyAsync(ints.get(), host_ints.data(), at.total * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
          "upload inputs");
    fwd->run(batch, ints.get<int32_t>(), at, longest, 0, *kv);
    fwd->final_norm(n);
    hidden.resize(size_t(n) * size_t(dim));
    check(cudaMemcpyAsync(hidden.data(), fwd->normed(), hidden.size() * sizeof(float), cudaMemcpyDeviceToHost, stream),
          "download hidden states");
    check(cudaStreamSynchronize(stream), "embedding pass");
    for (size_t i = first; i < last; ++i) {
      const int32_t s = int32_t(i - first), begin = batch.seq_token_begin[s];
      out[i].resize(size_t(dim));
      pool_and_normalize(hidden.data() + int64_t(begin) * dim, int32_t(inputs[i].size()), dim, pooling,
                         out[i].data());
    }
  }
};

CudaEmbedder::CudaEmbedder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaEmbedder::~CudaEmbedder() = default;

Expected<std::shared_ptr<CudaEmbedder>> CudaEmbedder::create(int32_t device,
                                                             std::shared_ptr<const cuda::DeviceModel> model,
                                                             KvDtype kv_dtype) {
  auto m = std::make_unique<Impl>();
  m->device = device;
  m->model = std::move(model);
  m->kv_dtype = kv_dtype;
  try {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasCreate(&m->blas), "cublasCreate");
    check(cublasSetStream(m->blas, m->stream), "cublasSetStream");
    m->fwd = std::make_unique<cuda::Forward>(m->model, m->stream, m->blas);
  } catch (const std::exception& e) {
    return make_error(Errc::unsupported,
                      "--device cuda:" + std::to_string(device) + ": the embedder: " + std::string(e.what()));
  }
  return std::shared_ptr<CudaEmbedder>(new CudaEmbedder(std::move(m)));
}

int32_t CudaEmbedder::dim() const { return impl_->model->c.dim; }

Expected<std::vector<std::vector<float>>> CudaEmbedder::embed(const std::vector<std::vector<int32_t>>& inputs,
                                                              Pooling pooling) {
  const ModelConfig& c = impl_->model->c;
  if (Status st = check_embedding_inputs(inputs, c.context_length, c.vocab_size); !st) return st.error();
  std::lock_guard lock(mutex_);
  std::vector<std::vector<float>> out(inputs.size());
  try {
    check(cudaSetDevice(impl_->device), "cudaSetDevice");  // the caller's thread, not the creator's
    for (const auto& [first, last] : embedding_batches(inputs, kBatchTokens))
      impl_->run_batch(inputs, first, last, pooling, out);
  } catch (const std::exception& e) {
    // What a failed batch queued ends before the next call may free its buffers.
    cudaStreamSynchronize(impl_->stream);
    return make_error(Errc::internal, "--device cuda:" + std::to_string(impl_->device) + ": embeddings: " + e.what());
  }
  return out;
}

}  // namespace conveyor
