// A test fixture that runs each test once per instruction-set path the CPU
// kernels choose at run time (quant_matmul.hpp's Isa, forced for the test).
#pragma once

#include <gtest/gtest.h>

#include "kernels/cpu/quant_matmul.hpp"

namespace conveyor::kernels::testing {

// Whether this CPU can run a test forced onto `isa`: avx2 always (the
// build's own code where the CPU lacks it), avxvnni where it has AVX-VNNI,
// avx512 where it has AVX-512 VNNI, and amx there too (emulated tiles where
// it has none).
inline bool isa_testable(Isa isa) {
  return isa_supported(isa == Isa::amx ? Isa::avx512 : isa);
}

inline const char* isa_test_name(Isa isa) {
  switch (isa) {
    case Isa::amx: return "amx";
    case Isa::avx512: return "avx512";
    case Isa::avxvnni: return "avxvnni";
    case Isa::avx2: break;
  }
  return "avx2";
}

class IsaParamTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_testable(GetParam())) GTEST_SKIP() << "this CPU does not run " << isa_name(GetParam());
    force_isa(GetParam());
  }
  void TearDown() override { force_isa(detected_isa()); }
};

// The AVX2 path (on CPUs without AVX2, the build's own code) and AVX-512;
// the avx2 path alone where CONVEYOR_TEST_OWN_COMPILATION_ONLY is defined
// (tests/kernels/cpu/CMakeLists.txt says why). avxvnni changes the quantized
// products alone (quant_matmul_test.cpp runs them under it too); every other
// kernel runs its AVX2 code there.
#ifdef CONVEYOR_TEST_OWN_COMPILATION_ONLY
#define CONVEYOR_TESTED_ISAS ::testing::Values(Isa::avx2)
#else
#define CONVEYOR_TESTED_ISAS ::testing::Values(Isa::avx2, Isa::avx512)
#endif
#define CONVEYOR_INSTANTIATE_ISAS(suite)                        \
  INSTANTIATE_TEST_SUITE_P(Isas, suite, CONVEYOR_TESTED_ISAS, \
                           [](const auto& info) { return ::conveyor::kernels::testing::isa_test_name(info.param); })

}  // namespace conveyor::kernels::testing
