#include "model/bf16_pack.hpp"

#include "kernels/cpu/kv_dtype.hpp"

namespace conveyor {

std::vector<uint16_t> pack_bf16(std::initializer_list<const WeightMatrix*> parts, int64_t cols) {
  int64_t total = 0;
  for (const WeightMatrix* m : parts) total += int64_t(m->elements(cols)) / cols;
  std::vector<uint16_t> out(size_t(total * cols));
  int64_t first = 0;
  for (const WeightMatrix* m : parts) {
    const int64_t rows = int64_t(m->elements(cols)) / cols;
#pragma omp parallel
    {
      std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        m->decode_row(r, cols, row.data());
        uint16_t* dst = out.data() + (first + r) * cols;
        for (int64_t i = 0; i < cols; ++i) dst[i] = kernels::kv_half::f32_to_bf16(row[size_t(i)]);
      }
    }
    first += rows;
  }
  return out;
}

}  // namespace conveyor
