// paged_attention.inc for AVX-512 with AVX512-BF16: bf16 caches' scores as
// vdpbf16ps dot products (block_scores_bf16_dot). paged_attention.cpp sends
// only bf16 attention here, and only where the CPU has the instructions.
#define CONVEYOR_ISA_NS avx512bf16
#define CONVEYOR_ATTENTION_BF16_DOT 1
#include "kernels/cpu/paged_attention.inc"
