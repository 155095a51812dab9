#include "backends/backend.hpp"

#include <algorithm>
#include <optional>

#include "backends/cpu/cpu_embedder.hpp"
#include "backends/cpu/cpu_step_runner.hpp"
#include "backends/cpu/cpu_swap_engine.hpp"
#include "backends/cpu/draft_model.hpp"
#include "backends/cpu/transformer.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "kernels/cpu/omp_threads.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "model/formats/loader.hpp"

namespace conveyor {

std::string weight_types(const ModelWeights& w) {
  const std::vector<const WeightMatrix*> all = weight_matrices(w);
  std::string out;
  for (WeightType t : {WeightType::f32, WeightType::bf16, WeightType::f16, WeightType::q8_0,
                       WeightType::q6_k, WeightType::q5_k, WeightType::q4_k, WeightType::q4_0}) {
    const bool used = std::any_of(all.begin(), all.end(),
                                  [t](const WeightMatrix* m) { return !m->empty() && m->type == t; });
    if (used) out += (out.empty() ? "" : ", ") + std::string(kernels::weight_type_name(t));
  }
  return out;
}

KvCapacityRequest kv_capacity_request(const EngineConfig& config, const ModelConfig& model, KvDtype dtype) {
  KvCapacityRequest request;
  request.token_bytes = int64_t(KvCacheShape::for_model(model, 1, 0, dtype).token_bytes());
  request.block_size = config.block_size;
  request.tokens = config.kv_cache_tokens;
  request.memory = config.kv_cache_memory;
  request.context_length = model.context_length;
  request.max_num_seqs = config.max_num_seqs;
  return request;
}

Status check_kv_dtype(KvDtype dtype, const ModelConfig& model) {
  if (kernels::kv_dtype_fits(dtype, model.head_dim())) return Status::ok();
  return make_error(Errc::invalid_argument, "--kv-cache-dtype " + std::string(to_string(dtype)) +
                                                ": stores each head in blocks of 32 values, and this model's heads have " +
                                                std::to_string(model.head_dim()) + "; use f16 or bf16");
}

namespace {

// The KV pool and the swap space live in host memory: together they must
// fit in what the kernel says is available once the weights are in, or the
// allocation fails (std::bad_alloc, which ended the process) or, overcommitted,
// the kernel kills the process when the pages are first touched.
Status check_host_memory(const EngineConfig& config, const ModelConfig& model, const Backend& b,
                         std::optional<int64_t> available) {
  const int64_t swap_blocks = config.swap_space_tokens / config.block_size;  // an int32 (validate)
  const int64_t swap_bytes =
      swap_blocks * config.block_size * int64_t(KvCacheShape::for_model(model, 1, 0, b.kv_dtype).token_bytes());
  if (!available || b.capacity.bytes + swap_bytes <= *available) return Status::ok();
  std::string what = "the KV cache (" + b.capacity.origin + ": " + std::to_string(b.capacity.tokens) + " tokens, " +
                     format_bytes(b.capacity.bytes) + ")";
  if (swap_bytes > 0)
    what += " and the swap space (--swap-space-tokens: " + std::to_string(swap_blocks * config.block_size) +
            " tokens, " + format_bytes(swap_bytes) + ")";
  return make_error(Errc::invalid_argument, what + (swap_bytes > 0 ? " take" : " takes") + " more than the " +
                                                format_bytes(*available) +
                                                " of memory available after loading the weights; ask for less");
}

}  // namespace

Expected<Backend> make_cpu_backend(const EngineConfig& config, LoadedModel model) {
  Backend b;
  b.kv_dtype = kv_dtype_of(config);
  if (Status s = check_kv_dtype(b.kv_dtype, model.config); !s) return s.error();
  const std::string types = weight_types(model.weights);
  // The weights first, so that the memory left for the cache is measured after them.
  auto transformer = std::make_shared<Transformer>(model.config, std::move(model.weights), config.threads);
  b.weights_description = format_bytes(int64_t(transformer->weight_bytes())) + " as " + types;
  if (types != "F32")
    b.weights_description += std::string(" (") + kernels::isa_name(kernels::active_isa()) + " products)";
  // --speculative draft:FILE: the draft model, whose cache has the target's
  // blocks (backends/cpu/draft_model.hpp), so a token costs both models' bytes.
  std::shared_ptr<Transformer> draft;
  if (config.speculative.method == SpeculativeMethod::draft) {
    const std::string flag = "--speculative draft:" + config.speculative.draft_model;
    auto loaded = load_model(config.speculative.draft_model);
    if (!loaded) return make_error(Errc::invalid_argument, flag + ": " + loaded.error().message);
    if (loaded->config.vocab_size != model.config.vocab_size)
      return make_error(Errc::invalid_argument,
                        flag + ": its vocabulary has " + std::to_string(loaded->config.vocab_size) +
                            " tokens and the model's " + std::to_string(model.config.vocab_size) +
                            "; a draft model needs the same vocabulary");
    if (!kernels::kv_dtype_fits(b.kv_dtype, loaded->config.head_dim()))
      return make_error(Errc::invalid_argument, flag + ": --kv-cache-dtype " + std::string(to_string(b.kv_dtype)) +
                                                    " does not fit its heads of " +
                                                    std::to_string(loaded->config.head_dim()));
    const std::string draft_types = weight_types(loaded->weights);
    draft = std::make_shared<Transformer>(loaded->config, std::move(loaded->weights), config.threads);
    b.weights_description += "; draft model " + format_bytes(int64_t(draft->weight_bytes())) + " as " + draft_types;
  }
  KvCapacityRequest request = kv_capacity_request(config, model.config, b.kv_dtype);
  if (draft)
    request.token_bytes += int64_t(KvCacheShape::for_model(draft->config(), 1, 0, b.kv_dtype).token_bytes());
  request.fraction = config.kv_cache_memory_fraction;
  const std::optional<int64_t> available = read_mem_available();
  if (config.kv_cache_tokens == 0 && config.kv_cache_memory == 0) request.available = available;
  auto capacity = plan_kv_capacity(request);
  if (!capacity) return capacity.error();
  b.capacity = std::move(capacity).value();
  if (Status fits = check_host_memory(config, model.config, b, available); !fits) return fits.error();

  const int32_t n_blocks = int32_t(b.capacity.tokens / config.block_size);
  auto kv = std::make_shared<KvCache>(
      KvCacheShape::for_model(model.config, config.block_size, n_blocks, b.kv_dtype));
  b.embedder = std::make_shared<CpuEmbedder>(transformer, b.kv_dtype);
  auto runner = std::make_shared<CpuStepRunner>(std::move(transformer), kv);
  if (draft) {
    auto draft_kv = std::make_shared<KvCache>(
        KvCacheShape::for_model(draft->config(), config.block_size, n_blocks, b.kv_dtype));
    runner->set_draft_model(std::make_unique<DraftModel>(std::move(draft), std::move(draft_kv)));
  }
  b.runner = std::move(runner);
  if (config.swap_space_tokens >= config.block_size)
    b.swap = std::make_shared<CpuSwapEngine>(kv, int32_t(config.swap_space_tokens / config.block_size));
  // The weights were packed in parallel on this thread: its OpenMP team goes,
  // so that the executor's spins between regions (kernels/cpu/omp_threads.hpp).
  kernels::release_openmp_threads();
  return b;
}

BackendFactory backend_factory(const DeviceSpec& device) {
  return device.kind == DeviceKind::cuda ? &make_cuda_backend : &make_cpu_backend;
}

Status check_device(const DeviceSpec& device) {
  if (device.kind == DeviceKind::cpu) return Status::ok();
  return check_cuda_device(device.index);
}

}  // namespace conveyor
