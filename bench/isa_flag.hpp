// A benchmark's `--isa avx2|avxvnni|avx512|amx`: the quantized products' and
// attention's instruction set, forced below what the CPU has (a forced AVX2,
// AVX-VNNI or AVX-512 VNNI run on a CPU with more), each only where the CPU
// runs it (amx not as the tests' emulation).
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "kernels/cpu/quant_matmul.hpp"

namespace conveyor::bench {

// Forces the named path; false, with a message on stderr, for an unknown
// name or one this CPU cannot run.
inline bool force_isa_flag(const std::string& value) {
  using kernels::Isa;
  const std::optional<Isa> isa = value == "avx2"      ? std::optional(Isa::avx2)
                                 : value == "avxvnni" ? std::optional(Isa::avxvnni)
                                 : value == "avx512"  ? std::optional(Isa::avx512)
                                 : value == "amx"    ? std::optional(Isa::amx)
                                                     : std::nullopt;
  if (!isa) {
    std::fprintf(stderr, "--isa must be avx2, avxvnni, avx512 or amx, not '%s'\n", value.c_str());
    return false;
  }
  if (!kernels::isa_supported(*isa)) {
    std::fprintf(stderr, "--isa %s: this CPU does not run it (it runs %s)\n", value.c_str(),
                 kernels::isa_name(kernels::detected_isa()));
    return false;
  }
  kernels::force_isa(*isa);
  return true;
}

}  // namespace conveyor::bench
