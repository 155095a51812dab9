// quant_kernels.inc for AVX2 with FMA and F16C (compiled with those flags only here).
#define CONVEYOR_ISA_NS avx2
#include "kernels/cpu/quant_kernels.inc"
