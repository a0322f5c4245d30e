// Fused attention (core/cuda/flash_tiles.h): what the kernels take. The host builds
// Params from tensors and checks their layout here (layout_ok is also the op's test for
// taking the fused path, core/ops/attention.cpp); the device reads Params and the lane
// register types. Pure C++, as flash_tiles.h.
// Legend: (n0, n1) the two leading dims (batch, heads), Tq queries, Tk keys, D the head
// dim (q, k and v share it).
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

#ifdef __CUDACC__
#define ZT_FLASH_FN __device__ __forceinline__
#define ZT_FLASH_UNROLL _Pragma("unroll")
#define ZT_FLASH_NO_UNROLL _Pragma("unroll 1")  // a loop kept rolled
#else
#define ZT_FLASH_FN inline
#define ZT_FLASH_UNROLL
#define ZT_FLASH_NO_UNROLL
#endif

namespace zt::flash {

/// A lane's registers: four 32-bit words (a 16-bit fragment), four or two floats.
struct U4 {
  uint32_t v[4];
};
struct F4 {
  float v[4];
};
struct F2 {
  float v[2];
};

/// Head dims the kernels are built for (q, k and v share it).
constexpr bool head_dim_supported(int64_t d) {
  return d == 32 || d == 64 || d == 96 || d == 128;
}

/// A (n0, n1, T, D) tensor of 16-bit elements: strides in elements, the last dim contiguous.
struct Mat {
  uint16_t* p;
  int64_t s0, s1, row;
  ZT_FLASH_FN uint16_t* at(int64_t b, int64_t h, int64_t r) const {
    return p + b * s0 + h * s1 + r * row;
  }
};

struct Params {
  Mat q, k, v, o, dout, dq, dk, dv;  // the forward writes o; the backward reads o and dout
  float* lse;                        // (n0, n1, Tq), written by the forward
  float* delta;                      // (n0, n1, Tq), the backward's rowsum(dout * o)
  int64_t matrices, n1, tq, tk;      // matrices = n0 n1
  float scale;
  bool causal;  // query i sees keys j <= i (Tq == Tk)
  // (n0 n1, Tq, D) contiguous, zeros before the atomic backward's dkdvq pass, which adds
  // dq / scale into it (Backward::atomic); null otherwise.
  float* dq_acc;
};

/// Whether t is in the kernels' layout. Every matrix is read by 16-byte copies or
/// written in 4-byte pairs, so its last dim must be contiguous and its start and the
/// strides of its other dims with more than one index multiples of 16 bytes: on the GPU
/// a misaligned access is a fault that ends the process's CUDA context.
inline bool layout_ok(const Tensor& t) {
  if (t.stride(-1) != 1 || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) % 8 != 0) return false;
  return true;
}

/// t (n0, n1, T, D) as a Mat; a clear error unless layout_ok(t).
inline Mat mat_of(const Tensor& t, const char* name) {
  if (!t.defined()) return {nullptr, 0, 0, 0};
  ZT_CHECK(layout_ok(t), "flash attention: ", name, " ", shape_str(t.sizes()), " (strides ",
           shape_str(t.strides()), ", start ", reinterpret_cast<uintptr_t>(t.data_ptr()) % 16,
           " bytes past a 16-byte boundary) is not in the kernels' layout: last dim contiguous,",
           " start and strides multiples of 16 bytes; pass a fresh copy (clone())");
  return {static_cast<uint16_t*>(t.data_ptr()), t.stride(0), t.stride(1), t.stride(2)};
}

/// Parameters from 4-D views (n0, n1, T, D); undefined tensors give null matrices.
inline Params params(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                     const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                     const Tensor& lse, const Tensor& delta, double scale, bool causal) {
  ZT_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && head_dim_supported(q.size(3)) &&
               k.size(3) == q.size(3) && v.size(3) == q.size(3) && v.size(2) == k.size(2) &&
               (!causal || q.size(2) == k.size(2)) && q.size(2) > 0 && k.size(2) > 0,
           "flash attention: unsupported shapes q ", shape_str(q.sizes()), ", k ",
           shape_str(k.sizes()), ", v ", shape_str(v.sizes()),
           " (a head dim of 32, 64, 96 or 128 shared by q, k and v; at least one query and key)");
  return {mat_of(q, "q"),
          mat_of(k, "k"),
          mat_of(v, "v"),
          mat_of(o, "out"),
          mat_of(dout, "the output's gradient"),
          mat_of(dq, "dq"),
          mat_of(dk, "dk"),
          mat_of(dv, "dv"),
          lse.defined() ? static_cast<float*>(lse.data_ptr()) : nullptr,
          delta.defined() ? static_cast<float*>(delta.data_ptr()) : nullptr,
          q.size(0) * q.size(1),
          q.size(1),
          q.size(2),
          k.size(2),
          static_cast<float>(scale),
          causal,
          nullptr};
}

}  // namespace zt::flash
