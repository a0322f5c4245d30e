// Row-major BLAS GEMM for the CPU kernels, f32 and f64: c (m, n) = alpha a (m, k) @ b (k, n)
// + beta c, with ta / tb reading a / b transposed, split over the kernel threads; and the
// helper that spreads many small GEMMs over the threads.
#pragma once

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/parallel.h"

namespace zt::cpu {

/// Groups that `total_flops` of work is worth, whatever the threads: about 4 MFLOP each
/// (a parallel region costs more than it saves on tiny work); 0 for less.
inline int64_t groups_worth(double total_flops) {
  constexpr double kMinGroupFlops = 4e6;
  return static_cast<int64_t>(total_flops / kMinGroupFlops);
}

/// Groups of independent GEMMs (`items` of them, `total_flops` in all) for the threads,
/// each group single-threaded inside BLAS: one per thread, at most one per item, and only
/// as many as groups_worth.
inline int64_t blas_work_groups(double total_flops, int64_t items) {
  return std::max<int64_t>(1, std::min<int64_t>({num_threads(), items, groups_worth(total_flops)}));
}

/// Has OpenBLAS run the kernels of this CPU's widest vector instructions where its own
/// choice fell back to SSE3 ones for a CPU model it does not know (blas_kernels.cpp),
/// once per process; returns the name of the kernels in use ("SkylakeX", "Haswell", ...).
/// blas_gemm calls it; comm::launch too, before any rank's thread starts.
std::string use_cpu_blas_kernels();

namespace detail {

inline void blas_call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                      const float* a, int lda, const float* b, int ldb, float beta, float* c,
                      int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void blas_call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
                      const double* a, int lda, const double* b, int ldb, double beta, double* c,
                      int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace detail

/// The multiple of output rows on which blas_gemm splits a product: a common multiple of
/// OpenBLAS's f32 register tiles along the rows of a row-major result (16 for the Intel
/// kernels, 24 for Zen's), so that every row is summed by the same micro-kernel as in one
/// call.
constexpr int64_t kBlasSplitAlign = 48;

/// How many blocks of output rows blas_gemm splits an f32 (m, n, k) product into on this
/// thread: one inside a parallel region, else as blas_work_groups allows (at least 4
/// MFLOP and kBlasSplitAlign rows each). 4 MFLOP (m n k of 2 * 10^6) is also past the
/// products OpenBLAS's small-matrix kernels take (m n k up to 10^6 on its AVX-512 cores in
/// 0.3.21), whose sums differ from its blocked kernels': a block runs the kernels the
/// whole product runs.
inline int64_t blas_split_parts(int64_t m, int64_t n, int64_t k) {
  if (omp_in_parallel()) return 1;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                       static_cast<double>(std::max<int64_t>(k, 1));
  return blas_work_groups(flops, std::max<int64_t>(m / kBlasSplitAlign, 1));
}

/// c (m, n) = alpha op(a) op(b) + beta c, row-major, on this thread's kernel threads.
/// BLAS's own threads stay off: an f32 product large enough to share is split into blocks
/// of output rows over the threads, each block one single-threaded BLAS call. (OpenBLAS's
/// pthreads pool would spin next to OpenMP's on the same cores, and each pool's spinning
/// slows the other's work.) The blocks are too large for OpenBLAS's small-matrix kernels
/// and start on a register-tile boundary, so each element is summed as in one call
/// (tests/core/test_blas_split.cpp checks the bits). Blocks of columns would not be: on
/// Zen, OpenBLAS sums a column by another micro-kernel depending on where the call's
/// columns start, so a product with fewer than 2 x kBlasSplitAlign rows runs whole. f64
/// products, the tests' reference precision, run whole: OpenBLAS's f64 kernels sum some
/// blocks differently. Inside a parallel region a product runs whole on the calling thread.
template <typename T>
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  ZT_CHECK(std::max({m, n, k, lda, ldb, ldc}) <= INT32_MAX, "gemm: a product of (", m, " x ", k,
           ") and (", k, " x ", n, ") with leading dims ", lda, ", ", ldb, ", ", ldc,
           " does not fit BLAS's 32-bit sizes; split the product");
  static const bool kernels_chosen = (use_cpu_blas_kernels(), true);
  (void)kernels_chosen;
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
  const CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  const int64_t parts = std::is_same_v<T, float> ? blas_split_parts(m, n, k) : 1;
  if (parts <= 1) {
    detail::blas_call(TA, TB, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                      a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
                      static_cast<int>(ldc));
    return;
  }
  const int64_t tiles = (m + kBlasSplitAlign - 1) / kBlasSplitAlign;
  parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r0 = std::min(m, tiles * p / parts * kBlasSplitAlign);
      const int64_t r1 = std::min(m, tiles * (p + 1) / parts * kBlasSplitAlign);
      if (r0 >= r1) continue;
      detail::blas_call(TA, TB, static_cast<int>(r1 - r0), static_cast<int>(n), static_cast<int>(k),
                        alpha, ta ? a + r0 : a + r0 * lda, static_cast<int>(lda), b,
                        static_cast<int>(ldb), beta, c + r0 * ldc, static_cast<int>(ldc));
    }
  });
}

/// blas_gemm with alpha = 1.
template <typename T>
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  blas_gemm(ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
}

}  // namespace zt::cpu
