// Matrix products. CPU goes through BLAS (sgemm/dgemm), CUDA through cuBLAS.
// Legend: B batch, M/N/K matrix dims, F_in/F_out features.
#pragma once

#include "core/tensor.h"

namespace zt {

/// a (M, K) @ b (K, N) -> (M, N); also batched (..., M, K) @ (..., K, N) with
/// broadcast batch dims, and 1-D operands as in NumPy.
Tensor matmul(const Tensor& a, const Tensor& b);
/// a (B, M, K) @ b (B, K, N) -> (B, M, N).
Tensor bmm(const Tensor& a, const Tensor& b);
/// x (..., F_in), weight (F_out, F_in), bias (F_out) or undefined -> (..., F_out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
/// gelu(linear(x, weight, bias), tanh_approx = true) as one op: the bias and the GELU
/// run in the GEMM's epilogue (cuBLASLt on CUDA) and the backward is one autograd node
/// that keeps the pre-activation (..., F_out). 16-bit dtypes apply GELU to the fp32
/// accumulator, so they differ from the composed ops by one bf16/f16 rounding.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

/// Raw GEMM, no autograd: C = alpha * op(A) @ op(B) + beta * C, row-major with leading
/// dimensions lda, ldb, ldc (strided views allowed). A is (M, K) after op, B (K, N),
/// C (M, N). f32, f64, bf16 or f16 (16-bit types accumulate in fp32); device from the
/// tensors.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, double beta, const Tensor& c,
          int64_t ldc);

/// Raw batched product: out (B, M, N) = alpha * a (B, M, K) @ b (B, K, N) + beta * out,
/// no autograd; out contiguous. One strided-batched GEMM reads a and b in place when the
/// matrices of each are BLAS-compatible views a fixed stride apart (transposed views and
/// expanded batch dims included); other layouts are copied contiguous first.
void bmm_into(const Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1.0,
              double beta = 0.0);

}  // namespace zt
