// paged_attention.inc for AVX-512 (F, BW, VL) with F16C and FMA, compiled
// with those flags only here.
#define CONVEYOR_ISA_NS avx512
#include "kernels/cpu/paged_attention.inc"
