// The paged KV cache: a pool of equal blocks allocated once at start-up.
//
// Layout: block b is one contiguous region holding, for every layer, the keys
// and then the values of `block_size` token slots:
//   [n_blocks][n_layers][2 (K, V)][n_kv_heads][block_size][head_dim]  of dtype
// The element type is float32, f16, bf16 or q8_0 (kernels/cpu/kv_dtype.hpp);
// the layout is the same for each, only the bytes per element change (q8_0's
// blocks of 32 elements never straddle two head rows, since head_dim is a
// multiple of 32 where it is used). Keeping a block
// contiguous makes a swap to host memory, or a copy-on-write copy, one memcpy
// of block_bytes() per block; keeping a head's slots contiguous inside it
// makes attention's dot products run over contiguous memory.
//
// Memory: a pool's bytes come from a KvAllocator, host memory unless told
// otherwise. A CUDA build has allocators of device memory (the CUDA
// backend's pool, which the kernels read) and pinned host memory (its swap
// space) in backends/cuda/cuda_memory.hpp. The pointers below point into the allocator's memory, so
// host code may dereference them only where memory() is not `device`.
//
// Thread-safety: no locks. The engine shares one cache between two threads:
// the executor's runner (the forward pass and copy-on-write copies) and the
// swap actor's engine (block copies to and from host swap space), which may
// run at the same time on different blocks. That is safe because distinct
// blocks are distinct memory and nothing else in the object changes after
// construction; the scheduler never orders a copy of a block that a step in
// flight touches (engine/swap_engine.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/cpu/kv_dtype.hpp"
#include "model/config.hpp"
#include "base/status.hpp"

namespace conveyor {

using kernels::KvDtype;

// "f32" | "f16" | "bf16" | "q8_0"; nullopt for anything else.
std::optional<KvDtype> parse_kv_dtype(std::string_view name);
inline const char* to_string(KvDtype d) { return kernels::kv_dtype_name(d); }
// bf16 where this CPU has AVX512-BF16 (checked at run time), else f16.
KvDtype default_kv_dtype();

struct KvCacheShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;  // token slots per block
  int32_t n_blocks = 0;
  KvDtype dtype = KvDtype::f32;

  static KvCacheShape for_model(const ModelConfig& config, int32_t block_size, int32_t n_blocks,
                                KvDtype dtype = KvDtype::f32);
  // Elements in one block (all layers, K and V).
  size_t block_elems() const {
    return size_t(n_layers) * 2 * n_kv_heads * block_size * head_dim;
  }
  size_t block_bytes() const { return kernels::kv_bytes(dtype, int64_t(block_elems())); }
  // Bytes of one token's keys and values in all layers.
  size_t token_bytes() const { return kernels::kv_bytes(dtype, int64_t(n_layers) * 2 * n_kv_heads * head_dim); }
  // Elements of one head's K (or V) in one block: [block_size][head_dim].
  size_t head_elems() const { return size_t(block_size) * head_dim; }
};

// Where a pool's bytes live.
enum class KvMemory : uint8_t {
  host,         // ordinary host memory
  pinned_host,  // page-locked host memory: a device copies to and from it asynchronously
  device,       // accelerator memory: host code must not dereference it
};

// Allocates and frees pool memory. Implementations are thread-safe.
class KvAllocator {
 public:
  virtual ~KvAllocator() = default;
  // `bytes` zeroed bytes aligned to at least 64, or null when they cannot be had.
  virtual std::byte* allocate(size_t bytes) = 0;
  virtual void deallocate(std::byte* p, size_t bytes) = 0;
  virtual KvMemory memory() const = 0;
};

// Host memory, aligned to 64 bytes, with transparent huge pages asked for and
// every page touched at allocation (kv_cache.cpp says why).
std::shared_ptr<KvAllocator> host_kv_allocator();

class KvCache {
 public:
  // Host memory; throws std::bad_alloc when there is not enough (as `new` does).
  explicit KvCache(const KvCacheShape& shape);
  // Memory from `allocator`; an error when it cannot provide the pool.
  static Expected<std::shared_ptr<KvCache>> create(const KvCacheShape& shape,
                                                   std::shared_ptr<KvAllocator> allocator);

  const KvCacheShape& shape() const { return shape_; }
  KvDtype dtype() const { return shape_.dtype; }
  KvMemory memory() const { return allocator_->memory(); }
  size_t bytes() const { return shape_.block_bytes() * size_t(shape_.n_blocks); }

  // [n_kv_heads][block_size][head_dim] keys of `layer` in `block`, elements of dtype().
  void* keys(int32_t block, int32_t layer) { return slot(block, layer, 0); }
  void* values(int32_t block, int32_t layer) { return slot(block, layer, 1); }
  const void* keys(int32_t block, int32_t layer) const { return slot(block, layer, 0); }
  const void* values(int32_t block, int32_t layer) const { return slot(block, layer, 1); }
  // The whole block (all layers, block_bytes()): what a swap or a copy-on-write copies.
  std::byte* block_data(int32_t block) { return data_.get() + size_t(block) * shape_.block_bytes(); }
  const std::byte* block_data(int32_t block) const {
    return data_.get() + size_t(block) * shape_.block_bytes();
  }

 private:
  std::byte* slot(int32_t block, int32_t layer, int kv) const {
    return data_.get() + size_t(block) * shape_.block_bytes() +
           kernels::kv_bytes(shape_.dtype, (int64_t(layer) * 2 + kv) * shape_.n_kv_heads * int64_t(shape_.head_elems()));
  }

  KvCache(const KvCacheShape& shape, std::shared_ptr<KvAllocator> allocator);

  struct Free {
    KvAllocator* allocator;
    size_t bytes;
    void operator()(std::byte* p) const { allocator->deallocate(p, bytes); }
  };
  KvCacheShape shape_;
  std::shared_ptr<KvAllocator> allocator_;
  std::unique_ptr<std::byte[], Free> data_;
};

// Copies whole blocks, each (src, dst), within a cache in host memory (not
// KvMemory::device): a plan's copy-on-write copies on the CPU backend.
void copy_host_blocks(KvCache& kv, std::span<const std::pair<int32_t, int32_t>> copies);

}  // namespace conveyor
