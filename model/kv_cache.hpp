// The paged KV cache: a pool of equal blocks allocated once at start-up.
//
// Layout: block b is one contiguous region holding, for every layer, the keys
// and then the values of `block_size` token slots:
//   [n_blocks][n_layers][2 (K, V)][n_kv_heads][block_size][head_dim]  float32
// Keeping a block contiguous makes a swap to host memory one memcpy per block;
// keeping a head's slots contiguous inside it makes attention's dot products
// run over contiguous memory.
//
// Thread-safety: no locks. The engine shares one cache between two threads:
// the executor's runner (the forward pass and copy-on-write copies) and the
// swap actor's engine (block copies to and from host swap space), which may
// run at the same time on different blocks. That is safe because distinct
// blocks are distinct memory and nothing else in the object changes after
// construction; the scheduler never orders a copy of a block that a step in
// flight touches (actors/swap_engine.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "model/config.hpp"

namespace conveyor {

struct KvCacheShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;  // token slots per block
  int32_t n_blocks = 0;

  static KvCacheShape for_model(const ModelConfig& config, int32_t block_size, int32_t n_blocks);
  // Floats in one block (all layers, K and V).
  size_t block_floats() const {
    return size_t(n_layers) * 2 * n_kv_heads * block_size * head_dim;
  }
  size_t block_bytes() const { return block_floats() * sizeof(float); }
  // Floats of one head's K (or V) in one block: [block_size][head_dim].
  size_t head_floats() const { return size_t(block_size) * head_dim; }
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }

  // [n_kv_heads][block_size][head_dim] keys of `layer` in `block`.
  float* keys(int32_t block, int32_t layer) { return slot(block, layer, 0); }
  float* values(int32_t block, int32_t layer) { return slot(block, layer, 1); }
  const float* keys(int32_t block, int32_t layer) const { return slot(block, layer, 0); }
  const float* values(int32_t block, int32_t layer) const { return slot(block, layer, 1); }
  // The whole block (all layers): what a swap copies.
  float* block_data(int32_t block) { return data_.get() + size_t(block) * shape_.block_floats(); }
  const float* block_data(int32_t block) const {
    return data_.get() + size_t(block) * shape_.block_floats();
  }

 private:
  float* slot(int32_t block, int32_t layer, int kv) const {
    return data_.get() + size_t(block) * shape_.block_floats() +
           (size_t(layer) * 2 + kv) * shape_.n_kv_heads * shape_.head_floats();
  }

  KvCacheShape shape_;
  std::unique_ptr<float[]> data_;
};

}  // namespace conveyor
