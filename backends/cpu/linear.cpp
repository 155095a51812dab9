#include "backends/cpu/linear.hpp"

#include <sys/mman.h>

#include <cassert>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/matmul.hpp"

namespace conveyor {

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  data_.reset(static_cast<uint8_t*>(std::aligned_alloc(align, rounded > 0 ? rounded : align)));
  if (align == kHuge) madvise(data_.get(), rounded, MADV_HUGEPAGE);  // advice: failure is harmless
}

void AlignedBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

bool same_type(std::initializer_list<const WeightMatrix*> parts) {
  for (const WeightMatrix* p : parts)
    if (p->type != (*parts.begin())->type) return false;
  return true;
}

namespace {

// The rows of `parts` one after another: float values or encoded bytes.
template <class T>
std::vector<T> concatenate(std::initializer_list<const WeightMatrix*> parts) {
  std::vector<T> out;
  for (const WeightMatrix* p : parts) {
    if constexpr (std::is_same_v<T, float>)
      out.insert(out.end(), p->values.begin(), p->values.end());
    else
      out.insert(out.end(), p->encoded.begin(), p->encoded.end());
  }
  return out;
}

}  // namespace

Linear Linear::stack(std::initializer_list<const WeightMatrix*> parts, int32_t cols) {
  assert(same_type(parts));
  Linear l;
  l.type_ = (*parts.begin())->type;
  l.cols_ = cols;
  if (l.type_ == WeightType::f32) {
    const std::vector<float> w = parts.size() == 1 ? (*parts.begin())->values : concatenate<float>(parts);
    l.rows_ = int32_t(w.size() / size_t(cols));
    l.data_ = AlignedBuffer(kernels::packed_matrix_floats(l.rows_, cols) * sizeof(float));
    kernels::pack_matrix(w.data(), l.rows_, cols, reinterpret_cast<float*>(l.data_.data()));
    return l;
  }
  const size_t row_bytes = kernels::row_bytes(l.type_, cols);
  std::vector<uint8_t> joined;
  const uint8_t* w = (*parts.begin())->encoded.data();
  size_t total = (*parts.begin())->encoded.size();
  if (parts.size() > 1) {
    joined = concatenate<uint8_t>(parts);
    w = joined.data();
    total = joined.size();
  }
  l.rows_ = int32_t(total / row_bytes);
  l.data_ = AlignedBuffer(kernels::packed_weight_bytes(l.type_, l.rows_, cols));
  kernels::pack_weights(l.type_, w, l.rows_, cols, l.data_.data());
  return l;
}

Linear Linear::gate_up(const WeightMatrix& gate, const WeightMatrix& up, int32_t cols) {
  assert(gate.type == up.type);
  Linear l;
  l.type_ = gate.type;
  l.cols_ = cols;
  if (l.type_ == WeightType::f32) {
    l.rows_ = int32_t(gate.values.size() / size_t(cols));
    l.data_ = AlignedBuffer(kernels::packed_gate_up_floats(l.rows_, cols) * sizeof(float));
    kernels::pack_gate_up(gate.values.data(), up.values.data(), l.rows_, cols,
                          reinterpret_cast<float*>(l.data_.data()));
    return l;
  }
  l.rows_ = int32_t(gate.encoded.size() / kernels::row_bytes(l.type_, cols));
  l.data_ = AlignedBuffer(kernels::packed_gate_up_bytes(l.type_, l.rows_, cols));
  kernels::pack_gate_up_weights(l.type_, gate.encoded.data(), up.encoded.data(), l.rows_, cols,
                                l.data_.data());
  return l;
}

void Linear::apply(const float* x, int64_t ldx, int32_t n, float* y, int64_t ldy, bool accumulate,
                   kernels::QuantScratch& scratch) const {
  if (type_ == WeightType::f32)
    kernels::matmul_packed(x, ldx, n, reinterpret_cast<const float*>(data_.data()), rows_, cols_, y,
                           ldy, accumulate);
  else
    kernels::matmul_weights(type_, x, ldx, n, data_.data(), rows_, cols_, y, ldy, accumulate,
                            scratch);
}

void Linear::apply_swiglu(const float* x, int64_t ldx, int32_t n, float* y, int64_t ldy,
                          kernels::QuantScratch& scratch) const {
  if (type_ == WeightType::f32)
    kernels::matmul_packed_swiglu(x, ldx, n, reinterpret_cast<const float*>(data_.data()), rows_,
                                  cols_, y, ldy);
  else
    kernels::matmul_weights_swiglu(type_, x, ldx, n, data_.data(), rows_, cols_, y, ldy, scratch);
}

void Linear::row(int32_t r, float* out) const {
  if (type_ == WeightType::f32)
    kernels::unpack_row(reinterpret_cast<const float*>(data_.data()), cols_, r, out);
  else
    kernels::unpack_weight_row(type_, data_.data(), cols_, r, out);
}

}  // namespace conveyor
