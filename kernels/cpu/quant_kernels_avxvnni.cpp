// quant_kernels.inc for AVX2 with AVX-VNNI (vpdpbusd on 256-bit vectors: Intel's
// client cores since Alder Lake and its E-core servers, which have no AVX-512),
// FMA and F16C (compiled with those flags only here).
#define CONVEYOR_ISA_NS avxvnni
#include "kernels/cpu/quant_kernels.inc"
