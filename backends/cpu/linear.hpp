// The linear layers of the forward pass: weight matrices packed once at load
// for their product, float32 panels (kernels/cpu/matmul.hpp) or file-encoded
// panels (kernels/cpu/quant_matmul.hpp), on 64-byte boundaries and, when
// large, on transparent huge pages (streaming weights through 4 KiB pages
// costs a third of the read bandwidth: kernels/cpu/README.md).
//
// Thread-safety: const methods may run concurrently only with distinct
// scratch; the forward pass calls them from one thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "kernels/cpu/quant_matmul.hpp"
#include "model/weights.hpp"

namespace conveyor {

// Owned bytes aligned for the kernels.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

// y = x·Wᵀ for one matrix, or for several of one type stacked on top of each
// other (the rows of wq, wk and wv as one product).
class Linear {
 public:
  Linear() = default;
  // `parts` must share one type; each is [rows_i, cols].
  static Linear stack(std::initializer_list<const WeightMatrix*> parts, int32_t cols);
  // gate and up, [rows, cols] each and of one type, packed for apply_swiglu.
  static Linear gate_up(const WeightMatrix& gate, const WeightMatrix& up, int32_t cols);

  WeightType type() const { return type_; }
  int32_t rows() const { return rows_; }  // output columns (per half for gate_up)
  size_t bytes() const { return data_.size(); }

  // y = x·Wᵀ (accumulate: y += x·Wᵀ).
  void apply(const float* x,  // [n, ldx]
             int64_t ldx, int32_t n,
             float* y,  // [n, ldy]
             int64_t ldy, bool accumulate, kernels::QuantScratch& scratch) const;
  // y = silu(x·gateᵀ) · (x·upᵀ) for a gate_up matrix.
  void apply_swiglu(const float* x, int64_t ldx, int32_t n, float* y, int64_t ldy,
                    kernels::QuantScratch& scratch) const;
  // Row r of W decoded to float (the lookup of a tied embedding).
  void row(int32_t r, float* out) const;

 private:
  WeightType type_ = WeightType::f32;
  int32_t rows_ = 0, cols_ = 0;
  AlignedBuffer data_;
};

// The types of `parts` agree, so they can be stacked into one Linear.
bool same_type(std::initializer_list<const WeightMatrix*> parts);

}  // namespace conveyor
