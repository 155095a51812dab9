// quant_kernels.inc for AVX-512 with VNNI (compiled with those flags only here).
#define CONVEYOR_ISA_NS avx512
#include "kernels/cpu/quant_kernels.inc"
