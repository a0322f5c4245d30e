// CPU GEMM through BLAS (cblas, row-major); the twin of core/cuda/gemm.cpp. bf16 and f16
// operands are converted to packed f32 copies, multiplied with fp32 accumulation (as
// GPUs do) and the result converted back.
#include <cblas.h>

#include <algorithm>

#include "core/kernels.h"

namespace zt::cpu {

namespace {

void gemm_f32_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                  int64_t lda, const Tensor& b, int64_t ldb, double beta, const Tensor& c,
                  int64_t ldc) {
  auto TA = ta ? CblasTrans : CblasNoTrans;
  auto TB = tb ? CblasTrans : CblasNoTrans;
  switch (c.dtype()) {
    case DType::f32:
      cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, static_cast<float>(alpha), a.data<float>(), lda,
                  b.data<float>(), ldb, static_cast<float>(beta), c.data<float>(), ldc);
      return;
    case DType::f64:
      cblas_dgemm(CblasRowMajor, TA, TB, m, n, k, alpha, a.data<double>(), lda, b.data<double>(),
                  ldb, beta, c.data<double>(), ldc);
      return;
    default:
      ZT_FAIL("gemm on CPU supports f32, f64, bf16 and f16, got ", dtype_name(c.dtype()));
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, double beta, const Tensor& c,
          int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (c.dtype() == DType::bf16 || c.dtype() == DType::f16) {
    // The operands are 2-D views whose memory layout (trans, ld) BLAS reads, so convert
    // the memory layout — the transpose of the view when trans — into a packed f32 copy.
    auto to_f32 = [](const Tensor& t, bool trans, int64_t& ld) {
      Tensor f = (trans ? t.transpose(0, 1) : t).to(DType::f32).contiguous();
      ld = std::max<int64_t>(f.size(1), 1);
      return f;
    };
    int64_t la, lb, lc;
    Tensor af = to_f32(a, trans_a, la), bf = to_f32(b, trans_b, lb), cf = to_f32(c, false, lc);
    gemm_f32_f64(trans_a, trans_b, m, n, k, alpha, af, la, bf, lb, beta, cf, lc);
    c.copy_(cf);
    return;
  }
  gemm_f32_f64(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace zt::cpu
