// Row kernels of lanes.h, compiled three times: for AVX-512 (16 lanes), AVX2 + FMA
// (8 lanes) and the SSE2 baseline (4 lanes); the first call picks the widest the CPU
// has (cpu_isa(): $ZT_CPU_ISA may name a narrower one). The tail of a row is padded into one
// vector, so every element of a row goes through the same lane arithmetic. The wide-vector helpers
// (here and in lanes.h) are always inlined into functions built for their ISA, so GCC's note that
// passing such vectors by value changes the ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "core/cpu/lanes.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace zt::cpu {

namespace {

template <typename V>
__attribute__((always_inline)) inline V apply(LaneOp op, V a, V b) {
  switch (op) {
    case LaneOp::kExp:
      return exp_lanes(a);
    case LaneOp::kSigmoid:
      return sigmoid_lanes(a);
    case LaneOp::kSilu:
      return silu_lanes(a);
    case LaneOp::kSiluGrad:
      return silu_grad_lanes(a, b);
    case LaneOp::kGelu:
      return gelu_lanes(a);
    case LaneOp::kGeluGrad:
      return gelu_grad_lanes(a, b);
    case LaneOp::kGeluTanh:
      return gelu_tanh_lanes(a);
    case LaneOp::kGeluTanhGrad:
      return gelu_tanh_grad_lanes(a, b);
  }
  return a;
}

template <typename V, LaneOp Op>
__attribute__((always_inline)) inline void row(float* out, const float* a, const float* b,
                                               int64_t n) {
  constexpr int64_t w = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + w <= n; i += w) {
    const V r = apply<V>(Op, load_part<V>(a + i, w), b ? load_part<V>(b + i, w) : V{});
    std::memcpy(out + i, &r, sizeof r);
  }
  if (i < n) {
    const V r = apply<V>(Op, load_part<V>(a + i, n - i), b ? load_part<V>(b + i, n - i) : V{});
    store_part(out + i, r, n - i);
  }
}

template <typename V>
__attribute__((always_inline)) inline void row_any(LaneOp op, float* out, const float* a,
                                                   const float* b, int64_t n) {
  switch (op) {
    case LaneOp::kExp:
      return row<V, LaneOp::kExp>(out, a, b, n);
    case LaneOp::kSigmoid:
      return row<V, LaneOp::kSigmoid>(out, a, b, n);
    case LaneOp::kSilu:
      return row<V, LaneOp::kSilu>(out, a, b, n);
    case LaneOp::kSiluGrad:
      return row<V, LaneOp::kSiluGrad>(out, a, b, n);
    case LaneOp::kGelu:
      return row<V, LaneOp::kGelu>(out, a, b, n);
    case LaneOp::kGeluGrad:
      return row<V, LaneOp::kGeluGrad>(out, a, b, n);
    case LaneOp::kGeluTanh:
      return row<V, LaneOp::kGeluTanh>(out, a, b, n);
    case LaneOp::kGeluTanhGrad:
      return row<V, LaneOp::kGeluTanhGrad>(out, a, b, n);
  }
}

__attribute__((target(ZT_TARGET_AVX512))) void row_avx512(LaneOp op, float* out, const float* a,
                                                          const float* b, int64_t n) {
  row_any<f32x16>(op, out, a, b, n);
}

__attribute__((target(ZT_TARGET_AVX2))) void row_avx2(LaneOp op, float* out, const float* a,
                                                      const float* b, int64_t n) {
  row_any<f32x8>(op, out, a, b, n);
}

void row_sse2(LaneOp op, float* out, const float* a, const float* b, int64_t n) {
  row_any<f32x4>(op, out, a, b, n);
}

using RowFn = void (*)(LaneOp, float*, const float*, const float*, int64_t);

RowFn pick_row() {
  switch (cpu_isa()) {
    case Isa::kAvx512:
      return row_avx512;
    case Isa::kAvx2:
      return row_avx2;
    case Isa::kSse2:
      break;
  }
  return row_sse2;
}

}  // namespace

Isa widest_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
    return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  return Isa::kSse2;
}

Isa capped_isa(Isa widest, const char* cap) {
  if (!cap || !*cap) return widest;
  const std::string want = cap;
  const Isa c = want == "avx512" ? Isa::kAvx512
                : want == "avx2" ? Isa::kAvx2
                : want == "sse2"
                    ? Isa::kSse2
                    : throw Error("ZT_CPU_ISA must be avx512, avx2 or sse2, got '" + want + "'");
  return std::min(c, widest);
}

Isa cpu_isa() {
  static const Isa isa = capped_isa(widest_isa(), std::getenv("ZT_CPU_ISA"));
  return isa;
}

void lane_row(LaneOp op, float* out, const float* a, const float* b, int64_t n) {
  static const RowFn fn = pick_row();
  fn(op, out, a, b, n);
}

}  // namespace zt::cpu
