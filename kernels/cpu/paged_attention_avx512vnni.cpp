// paged_attention.inc for AVX-512 with AVX512-VNNI: q8_0 caches' scores as
// vpdpbusd dot products (Q8Queries). paged_attention.cpp sends only q8_0
// attention here, and only where the CPU has the instructions.
#define CONVEYOR_ISA_NS avx512vnni
#define CONVEYOR_ATTENTION_Q8_DOT 1
#include "kernels/cpu/paged_attention.inc"
