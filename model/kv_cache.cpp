#include "model/kv_cache.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <new>

namespace conveyor {

std::optional<KvDtype> parse_kv_dtype(std::string_view name) {
  if (name == "f32") return KvDtype::f32;
  if (name == "f16") return KvDtype::f16;
  if (name == "bf16") return KvDtype::bf16;
  if (name == "q8_0") return KvDtype::q8_0;
  return std::nullopt;
}

KvDtype default_kv_dtype() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bf16")) return KvDtype::bf16;
#endif
  return KvDtype::f16;
}

KvCacheShape KvCacheShape::for_model(const ModelConfig& config, int32_t block_size,
                                     int32_t n_blocks, KvDtype dtype) {
  KvCacheShape s;
  s.n_layers = config.n_layers;
  s.n_kv_heads = config.n_kv_heads;
  s.head_dim = config.head_dim();
  s.block_size = block_size;
  s.n_blocks = n_blocks;
  s.dtype = dtype;
  return s;
}

namespace {

constexpr std::align_val_t kPoolAlignment{64};

class HostAllocator final : public KvAllocator {
 public:
  std::byte* allocate(size_t bytes) override {
    auto* data = static_cast<std::byte*>(
        ::operator new[](std::max<size_t>(bytes, 1), kPoolAlignment, std::nothrow));
    if (data == nullptr) return nullptr;
    // Ask for transparent huge pages on the pool's 2 MiB-aligned interior:
    // attention reads blocks scattered over the pool, and with 4 KiB pages it
    // loses up to a third of the read bandwidth (kernels/cpu/README.md).
    constexpr uintptr_t kHuge = uintptr_t(2) << 20;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    // Touch every page now so the first forward pass does not pay for faults.
    std::memset(data, 0, bytes);
    return data;
  }
  void deallocate(std::byte* p, size_t) override { ::operator delete[](p, kPoolAlignment); }
  KvMemory memory() const override { return KvMemory::host; }
};

}  // namespace

std::shared_ptr<KvAllocator> host_kv_allocator() {
  static const std::shared_ptr<KvAllocator> host = std::make_shared<HostAllocator>();
  return host;
}

KvCache::KvCache(const KvCacheShape& shape, std::shared_ptr<KvAllocator> allocator)
    : shape_(shape),
      allocator_(std::move(allocator)),
      data_(allocator_->allocate(bytes()), Free{allocator_.get(), bytes()}) {}

KvCache::KvCache(const KvCacheShape& shape) : KvCache(shape, host_kv_allocator()) {
  if (!data_) throw std::bad_alloc();
}

Expected<std::shared_ptr<KvCache>> KvCache::create(const KvCacheShape& shape,
                                                   std::shared_ptr<KvAllocator> allocator) {
  std::shared_ptr<KvCache> kv(new KvCache(shape, std::move(allocator)));
  if (!kv->data_)
    return make_error(Errc::resource_exhausted,
                      "cannot allocate the KV cache's " + std::to_string(kv->bytes()) + " bytes");
  return kv;
}

void copy_host_blocks(KvCache& kv, std::span<const std::pair<int32_t, int32_t>> copies) {
  assert(kv.memory() != KvMemory::device);
  for (const auto& [src, dst] : copies) std::memcpy(kv.block_data(dst), kv.block_data(src), kv.shape().block_bytes());
}

}  // namespace conveyor
