#include "bench/int8_peak.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "bench/bench_util.hpp"

namespace conveyor::bench {
namespace {

// The integer peak of the quantized products' inner instruction, in int8
// multiply-adds x 2 per second over the OpenMP team. Written in assembly, so
// that no compiler choice moves it: GCC's own code for the same loop over an
// array of accumulators kept some of them on the stack in one build and all
// in registers in another, and the figure moved by 1.5x between builds.
//
// AVX-512 VNNI: vpdpbusd on zmm, into 24 independent accumulators, more than
// its latency times two a cycle. The values are whatever the registers hold:
// the timing does not depend on them.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) double int8_ops_vnni(long iters) {
  double ops = 0;
#pragma omp parallel reduction(+ : ops)
  {
    long n = iters;
#define DP(r) "vpdpbusd %%zmm31, %%zmm30, %%zmm" r "\n\t"
    asm volatile(
        "vpternlogd $0xff, %%zmm30, %%zmm30, %%zmm30\n\t"
        "vpabsb %%zmm30, %%zmm31\n\t"
        "1:\n\t"
        DP("0") DP("1") DP("2") DP("3") DP("4") DP("5") DP("6") DP("7")
        DP("8") DP("9") DP("10") DP("11") DP("12") DP("13") DP("14") DP("15")
        DP("16") DP("17") DP("18") DP("19") DP("20") DP("21") DP("22") DP("23")
        "dec %0\n\t"
        "jnz 1b\n\t"
        : "+r"(n)
        :
        : "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7",
          "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13", "zmm14", "zmm15",
          "zmm16", "zmm17", "zmm18", "zmm19", "zmm20", "zmm21", "zmm22", "zmm23",
          "zmm30", "zmm31", "cc");
#undef DP
    ops = 2.0 * 64 * 24 * double(iters);
  }
  return ops;
}

// AVX2: the kernels' dot, vpmaddubsw + vpmaddwd + vpaddd on ymm, in 6
// independent chains (each product into a register of its own, so that the
// chains overlap across iterations), within AVX2's 16 registers.
__attribute__((target("avx2"))) double int8_ops_avx2(long iters) {
  double ops = 0;
#pragma omp parallel reduction(+ : ops)
  {
    long n = iters;
#define MA(acc, t)                                \
  "vpmaddubsw %%ymm13, %%ymm12, %%ymm" t "\n\t"   \
  "vpmaddwd %%ymm14, %%ymm" t ", %%ymm" t "\n\t"  \
  "vpaddd %%ymm" t ", %%ymm" acc ", %%ymm" acc "\n\t"
    asm volatile(
        "vpcmpeqb %%ymm12, %%ymm12, %%ymm12\n\t"
        "vpabsb %%ymm12, %%ymm13\n\t"
        "vpabsw %%ymm12, %%ymm14\n\t"
        "1:\n\t"
        MA("0", "6") MA("1", "7") MA("2", "8") MA("3", "9") MA("4", "10") MA("5", "11")
        "dec %0\n\t"
        "jnz 1b\n\t"
        : "+r"(n)
        :
        : "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7",
          "ymm8", "ymm9", "ymm10", "ymm11", "ymm12", "ymm13", "ymm14", "cc");
#undef MA
    ops = 2.0 * 32 * 6 * double(iters);
  }
  return ops;
}

// AVX-VNNI: vpdpbusd on ymm (the VEX encoding, `{vex}`), into 12
// independent accumulators, within AVX2's 16 registers.
__attribute__((target("avx2,avxvnni"))) double int8_ops_avxvnni(long iters) {
  double ops = 0;
#pragma omp parallel reduction(+ : ops)
  {
    long n = iters;
#define DP(r) "%{vex%} vpdpbusd %%ymm15, %%ymm14, %%ymm" r "\n\t"
    asm volatile(
        "vpcmpeqb %%ymm14, %%ymm14, %%ymm14\n\t"
        "vpabsb %%ymm14, %%ymm15\n\t"
        "1:\n\t"
        DP("0") DP("1") DP("2") DP("3") DP("4") DP("5") DP("6") DP("7") DP("8") DP("9") DP("10") DP("11")
        "dec %0\n\t"
        "jnz 1b\n\t"
        : "+r"(n)
        :
        : "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7",
          "ymm8", "ymm9", "ymm10", "ymm11", "ymm14", "ymm15", "cc");
#undef DP
    ops = 2.0 * 32 * 12 * double(iters);
  }
  return ops;
}

// The same for AMX's tdpbusd: four independent 16x16 int32 accumulator
// tiles, each a 16x64 by 64x16 byte product per instruction.
__attribute__((target("amx-tile,amx-int8"))) double int8_ops_amx(long iters) {
  double ops = 0;
#pragma omp parallel reduction(+ : ops)
  {
    alignas(64) uint8_t config[64] = {};
    config[0] = 1;  // palette 1: tiles 0-7, 16 rows of 64 bytes
    for (int t = 0; t < 8; ++t) config[16 + 2 * t] = 64, config[48 + t] = 16;
    alignas(64) uint8_t data[16 * 64];
    std::memset(data, 1, sizeof data);
    alignas(64) int32_t out[16 * 16];
    _tile_loadconfig(config);
    _tile_loadd(4, data, 64);
    _tile_loadd(5, data, 64);
    _tile_loadd(6, data, 64);
    _tile_loadd(7, data, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (long i = 0; i < iters; ++i) {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    ops = 2.0 * 16 * 16 * 64 * 4 * double(iters) + (out[0] == 42 ? 1 : 0);
  }
  return ops;
}

}  // namespace

double measure_int8_peak(kernels::Isa isa) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_s();
    const double ops = isa == kernels::Isa::amx      ? int8_ops_amx(100000)
                       : isa == kernels::Isa::avx512 ? int8_ops_vnni(400000)
                       : isa == kernels::Isa::avxvnni ? int8_ops_avxvnni(400000)
                                                     : int8_ops_avx2(800000);
    best = std::max(best, ops / (now_s() - t0));
  }
  return best;
}

kernels::Isa path_at(int batch_size) {
  const kernels::Isa isa = kernels::active_isa();
  return isa == kernels::Isa::amx && batch_size < kernels::amx_min_rows() ? kernels::Isa::avx512 : isa;
}

const char* int8_instruction(kernels::Isa isa) {
  switch (isa) {
    case kernels::Isa::amx: return "tdpbusd";
    case kernels::Isa::avx512: return "vpdpbusd zmm";
    case kernels::Isa::avxvnni: return "vpdpbusd ymm";
    case kernels::Isa::avx2: break;
  }
  return "vpmaddubsw ymm";
}

}  // namespace conveyor::bench
