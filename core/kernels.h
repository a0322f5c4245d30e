// The device kernel table. Ops (core/ops/*.cpp) validate arguments, allocate outputs
// and record autograd; kernels only compute. Each entry has a CPU implementation
// (core/cpu/, the specification) and, where built, a CUDA one (core/cuda/) with the
// same name and contract. `out` is always contiguous and preallocated; inputs may be
// strided (broadcast inputs arrive as expand()ed views with zero strides).
#pragma once

#include "core/tensor.h"

namespace zt {

enum class UnaryOp : uint8_t {
  kNeg, kExp, kLog, kSqrt, kRsqrt, kAbs, kRelu, kSilu, kSigmoid, kTanh, kGelu, kGeluTanh,
  kPow,       // x^p0
  kClamp,     // min(max(x, p0), p1)
  kAffine,    // x * p0 + p1
  kSign,
};

enum class BinaryOp : uint8_t {
  kAdd, kSub, kMul, kDiv,
  kEq, kNe, kLt, kLe, kGt, kGe,  // bool output
  // backward helpers: (a = upstream grad, b = saved input or output)
  kReluGrad,      // a * (b > 0), b = x
  kSiluGrad,      // a * s (1 + b (1 - s)), s = sigmoid(b), b = x
  kSigmoidGrad,   // a * b (1 - b), b = y
  kTanhGrad,      // a * (1 - b^2), b = y
  kGeluGrad,      // a * d/dx gelu(b), b = x (erf form)
  kGeluTanhGrad,  // tanh approximation
};

namespace cpu {
void unary(UnaryOp op, const Tensor& out, const Tensor& in, double p0, double p1);
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
/// out = a + alpha * b (b broadcast to out's shape); out may alias a.
void axpy(const Tensor& out, const Tensor& a, const Tensor& b, double alpha);
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
/// dst (any strides) <- src (same shape, any strides and dtype).
void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);
/// Sum of `in` over its last `inner` elements per row: in viewed as (rows, inner).
void sum_rows(const Tensor& out, const Tensor& in, int64_t rows, int64_t inner);
}  // namespace cpu

#ifdef ZT_WITH_CUDA
namespace cuda {
void unary(UnaryOp op, const Tensor& out, const Tensor& in, double p0, double p1);
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void axpy(const Tensor& out, const Tensor& a, const Tensor& b, double alpha);
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void copy(const Tensor& dst, const Tensor& src);  // both on the GPU
void fill(const Tensor& dst, double value);
void sum_rows(const Tensor& out, const Tensor& in, int64_t rows, int64_t inner);
/// Host <-> device copies of contiguous bytes (synchronous).
void memcpy_h2d(void* dst, const void* src, size_t bytes);
void memcpy_d2h(void* dst, const void* src, size_t bytes);
/// C = alpha op(A) op(B) + beta C, row-major, f32/f64/bf16/f16 (fp32 accumulate).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, double beta,
          const Tensor& c, int64_t ldc);
/// Philox fill at stream positions [offset, offset + numel): uniform or normal.
void random_fill(const Tensor& out, uint64_t seed, uint64_t offset, bool normal, double a,
                 double b);
}  // namespace cuda
#endif

}  // namespace zt
