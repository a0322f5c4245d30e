// Row-major BLAS GEMM for the CPU kernels, one overload per floating dtype:
// c (m, n) = a (m, k) @ b (k, n) + beta * c, with ta / tb reading a / b transposed; and
// the helpers that spread many small GEMMs over the threads.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>

#include "core/parallel.h"

namespace zt::cpu {

// Keeps BLAS single-threaded while in scope (it runs inside our worker threads), then
// restores the previous count.
class SerialBlas {
 public:
  SerialBlas() : prev_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SerialBlas() { openblas_set_num_threads(prev_); }
  SerialBlas(const SerialBlas&) = delete;
  SerialBlas& operator=(const SerialBlas&) = delete;

 private:
  int prev_;
};

/// Groups of independent GEMMs (`items` of them, `total_flops` in all) for the threads
/// under SerialBlas: one per thread, at most one per item, and only as many as keep about
/// 4 MFLOP of work each (a parallel region costs more than it saves on tiny work).
inline int64_t blas_work_groups(double total_flops, int64_t items) {
  constexpr double kMinGroupFlops = 4e6;
  const auto by_work = static_cast<int64_t>(total_flops / kMinGroupFlops);
  return std::max<int64_t>(1, std::min<int64_t>({num_threads(), items, by_work}));
}

inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}
inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a,
                      int64_t lda, const double* b, int64_t ldb, double beta, double* c,
                      int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

}  // namespace zt::cpu
