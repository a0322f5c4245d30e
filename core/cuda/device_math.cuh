// Device math shared by the CUDA kernels: float/double overloads of the libm functions
// (d_exp, d_log, ...), the operations that round once each (mul_rn, add_rn, ...: no
// contraction into an FMA), SiLU and its gradient, and the tanh-GELU and its gradient,
// each used by more than one kernel.
#pragma once

#include <cuda_runtime.h>

namespace zt::cuda {

// ---------------------------------------------------------------- libm, float/double

__device__ __forceinline__ float d_exp(float x) {
  return expf(x);
}
__device__ __forceinline__ double d_exp(double x) {
  return exp(x);
}
/// exp(x) by the hardware's base-2 exponential (ex2.approx, about 2 ulp, results below
/// 2^-126 flushed to 0) for sums of many terms, where it costs two instructions against
/// expf's eight; exp(x) itself in double.
__device__ __forceinline__ float d_exp_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}
__device__ __forceinline__ double d_exp_fast(double x) {
  return exp(x);
}
__device__ __forceinline__ float d_log(float x) {
  return logf(x);
}
__device__ __forceinline__ double d_log(double x) {
  return log(x);
}
__device__ __forceinline__ float d_sqrt(float x) {
  return sqrtf(x);
}
__device__ __forceinline__ double d_sqrt(double x) {
  return sqrt(x);
}
__device__ __forceinline__ float d_abs(float x) {
  return fabsf(x);
}
__device__ __forceinline__ double d_abs(double x) {
  return fabs(x);
}
__device__ __forceinline__ float d_tanh(float x) {
  return tanhf(x);
}
__device__ __forceinline__ double d_tanh(double x) {
  return tanh(x);
}
__device__ __forceinline__ float d_erf(float x) {
  return erff(x);
}
__device__ __forceinline__ double d_erf(double x) {
  return erf(x);
}
__device__ __forceinline__ float d_pow(float x, float p) {
  return powf(x, p);
}
__device__ __forceinline__ double d_pow(double x, double p) {
  return pow(x, p);
}

// ---------------------------------------------------------------- one rounding each

/// Arithmetic without contraction into an FMA. The CPU's baseline (SSE2) code rounds
/// after each operation and these match it there; the AVX2/AVX-512 variants in
/// cpu/norm.cpp and cpu/lanes.cpp may contract, so results can differ in the last place.
__device__ __forceinline__ float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ __forceinline__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ __forceinline__ float sub_rn(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ __forceinline__ double sub_rn(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ __forceinline__ float div_rn(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ __forceinline__ double div_rn(double a, double b) {
  return __ddiv_rn(a, b);
}
__device__ __forceinline__ float sqrt_rn(float a) {
  return __fsqrt_rn(a);
}
__device__ __forceinline__ double sqrt_rn(double a) {
  return __dsqrt_rn(a);
}

// ---------------------------------------------------------------- SiLU

template <typename A>
__device__ __forceinline__ A d_sigmoid(A x) {
  return A(1) / (A(1) + d_exp(-x));
}
/// silu(x) = x sigmoid(x), UnaryOp::kSilu's formula.
template <typename A>
__device__ __forceinline__ A d_silu(A x) {
  return x * d_sigmoid(x);
}
/// g * silu'(x) = g s (1 + x (1 - s)), s = sigmoid(x): BinaryOp::kSiluGrad's formula.
template <typename A>
__device__ __forceinline__ A d_silu_grad(A g, A x) {
  const A s = d_sigmoid(x);
  return g * s * (A(1) + x * (A(1) - s));
}

// ---------------------------------------------------------------- GELU

/// gelu_tanh(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), PyTorch's
/// approximate='tanh' GELU: UnaryOp::kGeluTanh's formula in double, the CPU's f64 one.
template <typename A>
__device__ __forceinline__ A gelu_tanh(A x) {
  const A k = A(0.79788456080286535588);  // sqrt(2/pi)
  return A(0.5) * x * (A(1) + d_tanh(k * (x + A(0.044715) * x * x * x)));
}
/// The same in float as the CPU's f32 kernels take it (gelu_tanh_lanes, core/cpu/lanes.h):
/// x sigmoid(2u), 2u = x (1.5957691216057308 + 0.0713548162726 x^2). Not the tanh form:
/// 1 + tanh(u) cancels as u goes to -inf (tanhf(u) rounds to -1 from u of about -9, x of
/// about -5.2), so that form's result loses most of its bits below x of about -4 and all of
/// them below -5.2 (0 at x = -6, where the value is -8.5e-11); x sigmoid(2u) keeps them.
__device__ __forceinline__ float gelu_tanh(float x) {
  return x * d_sigmoid(x * (1.5957691216057308f + 0.0713548162726f * x * x));
}

/// g * gelu_tanh'(x), the gradient of PyTorch's approximate='tanh' GELU at x for the
/// upstream gradient g, in double: BinaryOp::kGeluTanhGrad's formula (the CPU's).
template <typename A>
__device__ __forceinline__ A gelu_tanh_grad(A g, A x) {
  const A k = A(0.79788456080286535588);  // sqrt(2/pi)
  A u = k * (x + A(0.044715) * x * x * x);
  A t = d_tanh(u);
  A du = k * (A(1) + A(3) * A(0.044715) * x * x);
  return g * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * du);
}
/// The same gradient in float, as the CPU's f32 kernels take it (gelu_tanh_grad_lanes,
/// core/cpu/lanes.h): with s = sigmoid(2u) = 1 / (1 + e), e = exp(-2u),
/// g (s + 2 x s (1 - s) u'), and 1 - s as s e where 2u > 0 (no cancellation near s = 1).
/// Two MUFU operations (ex2, rcp; results below 2^-126 flushed to 0) and about ten more
/// against tanhf's branchy thirty, and closer to the exact gradient than the tanh form in
/// float (largest error over [-20, 20]: 2e-7 against 6e-7). Past |x| of about 10 it is
/// exactly g or 0 as on the CPU (e overflows to inf, so s is 0; or e s underflows to 0).
__device__ __forceinline__ float gelu_tanh_grad(float g, float x) {
  const float x2 = x * x;
  const float u2 = x * fmaf(0.0713548162726f, x2, 1.5957691216057308f);  // 2u
  float e, s;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(-u2 * 1.4426950408889634f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(1.f + e));
  const float rest = u2 > 0.f ? s * e : 1.f - s;                      // 1 - s
  const float du2 = fmaf(0.2140644488178f, x2, 1.5957691216057308f);  // 2u'
  return g * (s + x * s * rest * du2);
}

}  // namespace zt::cuda
