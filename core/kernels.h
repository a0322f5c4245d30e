// The device kernel table. Ops (core/ops/*.cpp) validate arguments, allocate outputs
// and record autograd; kernels only compute. Each entry has a CPU implementation
// (core/cpu/, the specification) and, where built, a CUDA one (core/cuda/) with the
// same name and contract. `out` is always contiguous and preallocated; inputs may be
// strided (broadcast inputs arrive as expand()ed views with zero strides).
#pragma once

#include <array>

#include "core/tensor.h"

namespace zt {

namespace cpu {
struct ConvGeometry;  // core/cpu/conv.h
}  // namespace cpu

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

// ---- convolution (core/cuda/conv.cu, cuDNN): twins of core/cpu/conv.h, also bf16/f16.
// Padding is symmetric (pad_d/h/w on both sides); the op pads asymmetric inputs first.
void conv_forward(const cpu::ConvGeometry& g, const Tensor& out, const Tensor& x,
                  const Tensor& weight, const Tensor& bias);
void conv_backward(const cpu::ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                   const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                   const Tensor& grad_bias);

// ---- normalization and softmax (core/cuda/norm.cu, softmax.cu): twins of core/cpu/norm.h
// with the same arguments and contract (contiguous, f32 or f64, double accumulation).
void group_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, int64_t S,
                        int64_t G, double eps);
void group_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t N, int64_t C, int64_t S, int64_t G);
void batch_norm_stats(const Tensor& mean, const Tensor& var, const Tensor& x, int64_t N, int64_t C,
                      int64_t S);
void batch_norm_forward(const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                        const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, int64_t S);
void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t N, int64_t C, int64_t S, bool training);
void softmax_forward(const Tensor& y, const Tensor& x, int64_t R, int64_t L, int64_t I, bool log);
void softmax_backward(const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t R, int64_t L,
                      int64_t I, bool log);
/// Negative log-likelihood sums for cross_entropy. lsm (P, C) f64 log-probabilities,
/// target (P) i64. Returns on the host (synchronizes): {-sum of lsm[p, t_p] over targets
/// != ignore_index, their count, the first position whose target is out of [0, C) or -1}.
std::array<double, 3> nll_sums(const Tensor& lsm, const Tensor& target, int64_t ignore_index);
/// d (P, C) f64 = (exp(lsm) - onehot(t)) * grad / count per kept position, 0 on ignored
/// ones; grad: the loss gradient, one f64 element on the GPU.
void nll_backward(const Tensor& d, const Tensor& lsm, const Tensor& target, const Tensor& grad,
                  double count, int64_t ignore_index);

// ---- indexing (core/cuda/index.cu). Indices are i64 or i32. Results equal the CPU's
// bit for bit: scatter-adds run per destination in the CPU's (source) order.
/// {min, max} of the index values (synchronizes); {0, -1} when empty.
std::array<int64_t, 2> index_range(const Tensor& index);
/// out (outer, n_idx, inner) = x (outer, n, inner)[:, index, :]; any dtype.
void index_rows(const Tensor& out, const Tensor& x, const Tensor& index, int64_t outer, int64_t n,
                int64_t inner);
/// dst (outer, n, inner) += src (outer, n_idx, inner) at rows index; floating dtypes.
void index_rows_add(const Tensor& dst, const Tensor& src, const Tensor& index, int64_t outer,
                    int64_t n, int64_t inner);
/// offsets (index's shape, i64): element offsets into a contiguous x (x_sizes) of
/// gather(x, dim, index).
void gather_offsets(const Tensor& offsets, const Tensor& index, const Shape& x_sizes, int64_t dim);
/// out[i] = x[offsets[i]] (x contiguous, out contiguous); any dtype.
void take(const Tensor& out, const Tensor& x, const Tensor& offsets);
/// dst[offsets[i]] += src[i] (dst, src contiguous); floating dtypes.
void put_add(const Tensor& dst, const Tensor& src, const Tensor& offsets);
/// out (ids..., classes) f32, already zero: out[i, ids[i]] = 1 (ids in range).
void one_hot(const Tensor& out, const Tensor& ids, int64_t classes);
/// out (rows) i64: index of the first max (or min) of each row of x (rows, n); NaNs are
/// skipped unless first, as the CPU's strict comparisons do. Any dtype.
void arg_extreme(const Tensor& out, const Tensor& x, int64_t rows, int64_t n, bool want_max);
/// Nearest resize of x (planes, D, H, W) to out (planes, Do, Ho, Wo), PyTorch's
/// 'nearest' index rule; any dtype.
void nearest_forward(const Tensor& out, const Tensor& x, int64_t planes, const Shape& in_dhw,
                     const Shape& out_dhw);
/// gx (planes, D, H, W) = sum of gy (planes, Do, Ho, Wo) over the outputs that read
/// each input, in output order; floating dtypes.
void nearest_backward(const Tensor& gx, const Tensor& gy, int64_t planes, const Shape& in_dhw,
                      const Shape& out_dhw);
}  // namespace cuda
#endif

}  // namespace zt
