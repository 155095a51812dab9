#include "model/kv_cache.hpp"

#include <cstring>

namespace conveyor {

KvCacheShape KvCacheShape::for_model(const ModelConfig& config, int32_t block_size,
                                     int32_t n_blocks) {
  KvCacheShape s;
  s.n_layers = config.n_layers;
  s.n_kv_heads = config.n_kv_heads;
  s.head_dim = config.head_dim();
  s.block_size = block_size;
  s.n_blocks = n_blocks;
  return s;
}

KvCache::KvCache(const KvCacheShape& shape)
    : shape_(shape), data_(new float[shape.block_floats() * size_t(shape.n_blocks)]) {
  // Touch every page now so the first forward pass does not pay for faults.
  std::memset(data_.get(), 0, shape.block_bytes() * size_t(shape.n_blocks));
}

}  // namespace conveyor
