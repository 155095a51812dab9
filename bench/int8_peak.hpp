// The int8 peak the quantized products are measured against, shared by
// decode_bench and quant_matmul_bench: the kernels' inner instruction run
// back to back on independent accumulators over the OpenMP team.
#pragma once

#include "kernels/cpu/quant_matmul.hpp"

namespace conveyor::bench {

// Integer ops/s (int8 multiply-adds x 2) of an instruction set's inner
// instruction: vpdpbusd on zmm for avx512, vpmaddubsw + vpmaddwd + vpaddd on
// ymm for avx2 (the kernels' AVX2 dot), tdpbusd for amx. The best of 3 runs.
double measure_int8_peak(kernels::Isa isa);

// The products' path at a batch size: AMX tiles from amx_min_rows() rows on
// where the kernels run amx (quant_matmul.hpp), else the instruction set's own.
kernels::Isa path_at(int batch_size);

// The instruction measure_int8_peak times, for the output.
const char* int8_instruction(kernels::Isa isa);

}  // namespace conveyor::bench
