// quant_kernels.inc for CPUs with AMX-INT8: the AVX-512 VNNI kernels, and the
// tile kernels of quant_kernels_amx.inc for batches (compiled with those flags
// only here).
#define CONVEYOR_ISA_NS amx
#define CONVEYOR_ISA_AMX
#include "kernels/cpu/quant_kernels.inc"
