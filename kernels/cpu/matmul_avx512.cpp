// matmul_packed.inc for AVX-512F (32 zmm: 12-row tiles), compiled with those flags only here.
#define CONVEYOR_ISA_NS avx512
#define CONVEYOR_TILE_ROWS 12
#define CONVEYOR_VEC_LANES 16
#include "kernels/cpu/matmul_packed.inc"
