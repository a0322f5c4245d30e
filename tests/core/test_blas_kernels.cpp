// OpenBLAS runs kernels of the CPU's vector width: where its own choice fell back to its SSE3
// kernels ("Prescott") for a CPU model it does not know, zt picks those of the widest vector
// instructions the CPU runs (use_cpu_blas_kernels), which are 4-5x faster.
#include <gtest/gtest.h>
#include <strings.h>

#include <cstdlib>
#include <string>

#include "core/cpu/blas.h"
#include "core/cpu/lanes.h"

using namespace zt;

TEST(BlasKernels, OpenBlasRunsKernelsOfTheCpusVectorWidth) {
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {};
  cpu::blas_gemm<float>(false, false, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);  // chooses first
  EXPECT_FLOAT_EQ(c[0], 19.0f);
  EXPECT_FLOAT_EQ(c[3], 50.0f);
  const std::string core = cpu::use_cpu_blas_kernels();
  EXPECT_EQ(core, openblas_get_corename());
  std::printf("[ blas     ] OpenBLAS kernels: %s\n", core.c_str());
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (cpu::cpu_isa() == cpu::Isa::kSse2 || (forced && strcasecmp(forced, "Prescott") == 0))
    GTEST_SKIP()
        << "this CPU runs no AVX2 (or ZT_CPU_ISA is sse2), or OPENBLAS_CORETYPE asks for Prescott";
  EXPECT_NE(strcasecmp(core.c_str(), "Prescott"), 0)
      << "OpenBLAS runs its SSE3 kernels on a CPU with AVX2 or AVX-512";
}
