// quant_matmul.hpp's products: choose the instruction set, quantize x, call
// the kernels of quant_kernels.inc compiled for it.
#include "kernels/cpu/quant_matmul.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "kernels/cpu/quant_panel.hpp"

namespace conveyor::kernels {

// Declared for each instruction set; defined in quant_kernels_{avx512,avxvnni,avx2,amx}.cpp.
#define CONVEYOR_DECLARE_ISA(ns)                                                                 \
  namespace ns {                                                                                 \
  void quantize_x(const PanelFormat& f, const float* x, int64_t ldx, int32_t n, int32_t k,      \
                  int8_t* q, float* d, float* s, int8_t* m);                                     \
  void matmul(const PanelFormat& f, const float* x, int64_t ldx, int32_t n, const int8_t* q,     \
              const float* d, const float* s, const int8_t* m, uint16_t* xh,                     \
              const uint8_t* packed, int32_t m_out, int32_t k, float* y, int64_t ldy,            \
              bool accumulate);                                                                  \
  void matmul_swiglu(const PanelFormat& f, const float* x, int64_t ldx, int32_t n,               \
                     const int8_t* q, const float* d, const float* s, const int8_t* m,           \
                     uint16_t* xh, const uint8_t* packed, int32_t hidden, int32_t k, float* y,   \
                     int64_t ldy);                                                               \
  }
CONVEYOR_DECLARE_ISA(avx512)
CONVEYOR_DECLARE_ISA(avxvnni)
CONVEYOR_DECLARE_ISA(avx2)
CONVEYOR_DECLARE_ISA(amx)
#undef CONVEYOR_DECLARE_ISA
namespace amx {
void emulate_tile_unit(bool on);
}

namespace {

std::atomic<int> forced{-1};

template <class T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// x as one product's kernels take it, on the instruction set read once for it.
struct Prepared {
  Isa isa;
  const int8_t* q;  // the QuantScratch's, below
  const float* d;
  const float* s;
  const int8_t* m;
  uint16_t* xh;
};

// Quantizes x into the scratch for an integer format; for BF16 weights on AMX,
// makes room for x in bf16 (the kernels round it).
Prepared prepare(const PanelFormat& f, const float* x, int64_t ldx, int32_t n, int32_t k,
                 QuantScratch& s) {
  const Isa isa = active_isa();
  if (f.half) {
    if (f.bf16 && isa == Isa::amx) grow(s.xh, size_t(n) * k);
  } else {
    const size_t blocks = size_t(n) * size_t(k / f.block);
    const size_t supers = f.super > 0 ? size_t(n) * size_t(k / f.super) : 0;
    int8_t* q = grow(s.xq, size_t(n) * k);
    float* d = grow(s.xd, supers > 0 ? supers : blocks);
    float* sums = grow(s.xs, supers > 0 ? 0 : blocks);
    int8_t* m = grow(s.xm, f.super > 0 && !f.centered ? supers * size_t(2 * f.super / f.block) : 0);
    if (isa == Isa::avx2)
      avx2::quantize_x(f, x, ldx, n, k, q, d, sums, m);
    else if (isa == Isa::avxvnni)
      avxvnni::quantize_x(f, x, ldx, n, k, q, d, sums, m);
    else  // AMX's kernels share AVX-512's quantization
      avx512::quantize_x(f, x, ldx, n, k, q, d, sums, m);
  }
  return {isa, s.xq.data(), s.xd.data(), s.xs.data(), s.xm.data(), s.xh.data()};
}

// AMX (tiles, INT8 and BF16) with the operating system's leave to use it: Linux (5.16 on) keeps
// a process from the tiles' 8 KiB of register state until it asks
// (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA); the grant covers all its threads.
bool amx_usable() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  // AMX-BF16, AMX-TILE, AMX-INT8
  if ((d & (1u << 22)) == 0 || (d & (1u << 24)) == 0 || (d & (1u << 25)) == 0) return false;
  constexpr long kReqXcompPerm = 0x1023, kGetXcompPerm = 0x1022, kXtiledata = 18;
  if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) != 0) return false;
  unsigned long granted = 0;
  if (syscall(SYS_arch_prctl, kGetXcompPerm, &granted) != 0) return false;
  return (granted & (1ul << kXtiledata)) != 0;
}

}  // namespace

bool quant_kernels_supported() {
  // F16C through cpuid (leaf 1, ecx bit 29): clang's __builtin_cpu_supports
  // does not know it.
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return ok;
}

// AVX-VNNI: CPUID leaf 7, sub-leaf 1, eax bit 4 (not every compiler's
// __builtin_cpu_supports knows it).
static bool cpu_has_avxvnni() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
  }();
  return ok;
}

static bool cpu_has_avx512_vnni() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return ok;
}

Isa detected_isa() {
  static const Isa isa = [] {
    if (!cpu_has_avx512_vnni()) return isa_supported(Isa::avxvnni) ? Isa::avxvnni : Isa::avx2;
    return amx_usable() ? Isa::amx : Isa::avx512;
  }();
  return isa;
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::avx2: return true;
    case Isa::avxvnni: return quant_kernels_supported() && cpu_has_avxvnni();
    case Isa::avx512: return cpu_has_avx512_vnni();
    case Isa::amx: return detected_isa() == Isa::amx;
  }
  return false;
}

bool isa_has_avx512(Isa isa) { return isa == Isa::avx512 || isa == Isa::amx; }

Isa active_isa() {
  const int f = forced.load(std::memory_order_relaxed);
  return f < 0 ? detected_isa() : Isa(f);
}

void force_isa(Isa isa) {
  amx::emulate_tile_unit(isa == Isa::amx && detected_isa() != Isa::amx);
  forced.store(int(isa), std::memory_order_relaxed);
}

int32_t amx_min_rows() { return kAmxMinRows; }

bool amx_emulated() { return active_isa() == Isa::amx && detected_isa() != Isa::amx; }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::amx: return "amx";
    case Isa::avx512: return "avx512-vnni";
    case Isa::avxvnni: return "avx-vnni";
    case Isa::avx2: break;
  }
  return "avx2";
}

void matmul_weights(WeightType type, const float* x, int64_t ldx, int32_t n,
                    const uint8_t* packed_w, int32_t m, int32_t k, float* y, int64_t ldy,
                    bool accumulate, QuantScratch& scratch) {
  if (n <= 0 || m <= 0) return;
  const PanelFormat f = panel_format(type, k);
  const auto [isa, q, d, s, xm, xh] = prepare(f, x, ldx, n, k, scratch);
  switch (isa) {
    case Isa::amx:
      return amx::matmul(f, x, ldx, n, q, d, s, xm, xh, packed_w, m, k, y, ldy, accumulate);
    case Isa::avx512:
      return avx512::matmul(f, x, ldx, n, q, d, s, xm, xh, packed_w, m, k, y, ldy, accumulate);
    case Isa::avxvnni:
      return avxvnni::matmul(f, x, ldx, n, q, d, s, xm, xh, packed_w, m, k, y, ldy, accumulate);
    case Isa::avx2:
      return avx2::matmul(f, x, ldx, n, q, d, s, xm, xh, packed_w, m, k, y, ldy, accumulate);
  }
}

void matmul_weights_swiglu(WeightType type, const float* x, int64_t ldx, int32_t n,
                           const uint8_t* packed_gate_up, int32_t hidden, int32_t k, float* y,
                           int64_t ldy, QuantScratch& scratch) {
  if (n <= 0 || hidden <= 0) return;
  const PanelFormat f = panel_format(type, k);
  const auto [isa, q, d, s, xm, xh] = prepare(f, x, ldx, n, k, scratch);
  switch (isa) {
    case Isa::amx:
      return amx::matmul_swiglu(f, x, ldx, n, q, d, s, xm, xh, packed_gate_up, hidden, k, y, ldy);
    case Isa::avx512:
      return avx512::matmul_swiglu(f, x, ldx, n, q, d, s, xm, xh, packed_gate_up, hidden, k, y, ldy);
    case Isa::avxvnni:
      return avxvnni::matmul_swiglu(f, x, ldx, n, q, d, s, xm, xh, packed_gate_up, hidden, k, y, ldy);
    case Isa::avx2:
      return avx2::matmul_swiglu(f, x, ldx, n, q, d, s, xm, xh, packed_gate_up, hidden, k, y, ldy);
  }
}

}  // namespace conveyor::kernels
