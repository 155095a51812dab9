// A test fixture that runs each test once per instruction-set path the CPU
// kernels choose at run time (quant_matmul.hpp's Isa, forced for the test).
#pragma once

#include <gtest/gtest.h>

#include "kernels/cpu/quant_matmul.hpp"

namespace conveyor::kernels::testing {

class IsaParamTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() != Isa::avx2 && detected_isa() == Isa::avx2) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
    force_isa(GetParam());
  }
  void TearDown() override { force_isa(detected_isa()); }
};

// The AVX2 path (on CPUs without AVX2, the build's own code) and AVX-512;
// the avx2 path alone where CONVEYOR_TEST_OWN_COMPILATION_ONLY is defined
// (tests/kernels/cpu/CMakeLists.txt says why).
#ifdef CONVEYOR_TEST_OWN_COMPILATION_ONLY
#define CONVEYOR_TESTED_ISAS ::testing::Values(Isa::avx2)
#else
#define CONVEYOR_TESTED_ISAS ::testing::Values(Isa::avx2, Isa::avx512)
#endif
#define CONVEYOR_INSTANTIATE_ISAS(suite)                        \
  INSTANTIATE_TEST_SUITE_P(Isas, suite, CONVEYOR_TESTED_ISAS, \
                           [](const auto& info) { return info.param == Isa::avx2 ? "avx2" : "avx512"; })

}  // namespace conveyor::kernels::testing
