// matmul_packed.inc for AVX2 with FMA (16 ymm: 3-row tiles), compiled with those flags only here.
#define CONVEYOR_ISA_NS avx2
#define CONVEYOR_TILE_ROWS 3
#define CONVEYOR_VEC_LANES 8
#include "kernels/cpu/matmul_packed.inc"
