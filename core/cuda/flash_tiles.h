// Fused ("flash") attention for 16-bit q, k, v: the tiled algorithm, written once for two
// warp backends. On the GPU (core/cuda/flash_attention.cu) a warp is 32 threads and the
// 16 x 16 tile products run on tensor cores (WMMA); on the host
// (core/cpu/flash_attention.cpp) the same code runs with 32 emulated lanes and plain
// float products, so the CPU suite checks every index, mask and tail of the GPU kernels.
// Pure C++: no CUDA header is needed to include it (under nvcc its functions are device
// functions).
//
// One warp owns one 16-row tile (queries for the forward and dq, keys for dk and dv) and
// walks the other side's tiles of 16; warps never wait for each other, so only the
// warp's own barriers (Warp::lanes) order its shared memory. Nothing of size Tq x Tk
// is ever stored: the forward keeps each row's log-sum-exp, the backward recomputes
// the probabilities from it.
//   forward  pass 1: m, l = running max and sum of exp(scale s - m) over visible keys
//            pass 2: o = sum_j p_j v_j with p = exp(scale s - m) / l, rounded to 16 bits
//                    before its product (as FlashAttention); lse = m + log l
//   backward dq:   delta = rowsum(dout * o); ds = p (dout v^T - delta); dq = scale ds k
//            dk, dv (after dq, reading delta): dv = p^T dout, dk = scale ds^T q
// Two passes instead of an online rescale keep the output accumulators in the tensor
// cores' opaque fragments: no per-row factor ever multiplies them. The dq and dk/dv
// warps each own their outputs, so no atomics: results do not depend on scheduling.
// Legend: (n0, n1) the two leading dims (batch, heads), Tq queries, Tk keys, D the head
// dim (q, k and v share it), all tensors with the last dim contiguous.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

#ifdef __CUDACC__
#define ZT_FLASH_FN __device__ __forceinline__
#define ZT_FLASH_UNROLL _Pragma("unroll")
#else
#define ZT_FLASH_FN inline
#define ZT_FLASH_UNROLL
#endif

namespace zt::flash {

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
  int64_t n1, tq, tk;
  float scale;
  bool causal;  // query i sees keys j <= i (Tq == Tk)
};

/// t as a Mat. Every matrix needs its last dim contiguous (Mat has no column stride); one
/// the kernels stage (`staged`) is read by 16-byte copies, so its start and the strides
/// of its dims with more than one index must also be multiples of 16 bytes: on the GPU a
/// misaligned copy is a fault that ends the process's CUDA context.
inline Mat mat_of(const Tensor& t, const char* name, bool staged) {
  if (!t.defined()) return {nullptr, 0, 0, 0};
  bool ok = t.stride(3) == 1;
  if (staged) {
    ok = ok && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
    for (int64_t d = 0; d < 3; ++d) ok = ok && (t.size(d) == 1 || t.stride(d) % 8 == 0);
  }
  ZT_CHECK(ok, "flash attention: ", name, " ", shape_str(t.sizes()), " (strides ",
           shape_str(t.strides()), ", start ", reinterpret_cast<uintptr_t>(t.data_ptr()) % 16,
           " bytes past a 16-byte boundary) is not in the kernels' layout: last dim contiguous",
           staged ? ", start and strides multiples of 16 bytes" : "",
           "; pass a fresh copy (clone())");
  return {static_cast<uint16_t*>(t.data_ptr()), t.stride(0), t.stride(1), t.stride(2)};
}

/// Tiles<Warp, DK>: the algorithm for head dim D = 16 DK on one warp backend. Warp
/// provides lanes(f) (f(lane) for the 32 lanes, between barriers), the fragments FragA
/// (16 x 16 row-major), FragB (row-major), FragBt (column-major) and Acc (f32), their
/// load / zero / mma / store, and the 16-bit conversions, exp, log and 16-byte copies.
template <class Warp, int DK>
struct Tiles {
  static constexpr int D = 16 * DK;
  static constexpr int kLd = D + 8;    // staged rows: 16 bytes of padding against bank conflicts
  static constexpr int kLdS = 16 + 4;  // f32 tiles (a multiple of 4 floats, as WMMA needs)
  static constexpr int kLdP = 16 + 8;  // 16-bit tiles (a multiple of 8 elements)
  static constexpr int kVec = 8;       // elements per 16-byte copy
  using Acc = typename Warp::Acc;

  /// One warp's shared memory. Every array starts on a 32-byte boundary (WMMA's rule).
  struct Smem {
    alignas(32) uint16_t x[4][16 * kLd];   // staged 16 x D tiles
    alignas(32) float s[2][16 * kLdS];     // score and dP tiles
    alignas(32) uint16_t p[2][16 * kLdP];  // probability and ds tiles in 16 bits
    float r[2][16];                        // per-row statistics
  };

  static ZT_FLASH_FN bool visible(const Params& p, int64_t q, int64_t key) {
    return key < p.tk && (!p.causal || key <= q);
  }

  /// The warp's tile: matrix (b, h) and its first row r0. Query tiles go longest first
  /// (under the causal mask the last tile sees the most keys); key tiles in order.
  struct Task {
    int64_t b, h, bh, r0;
  };
  static ZT_FLASH_FN Task task_of(const Params& p, int64_t task, int64_t rows, bool last_first) {
    const int64_t tiles = (rows + 15) / 16, bh = task / tiles, i = task % tiles;
    return {bh / p.n1, bh % p.n1, bh, (last_first ? tiles - 1 - i : i) * 16};
  }

  /// Rows [r0, r0 + 16) of m's matrix (b, h) into dst; rows at or past `rows` read as 0.
  static ZT_FLASH_FN void stage(uint16_t* dst, const Mat& m, const Task& t, int64_t r0,
                                int64_t rows) {
    constexpr int kPerRow = D / kVec;
    Warp::lanes([&](int lane) {
      for (int i = lane; i < 16 * kPerRow; i += 32) {
        const int r = i / kPerRow, c = i % kPerRow * kVec;
        if (r0 + r < rows)
          Warp::copy16(dst + r * kLd + c, m.at(t.b, t.h, r0 + r) + c);
        else
          Warp::zero16(dst + r * kLd + c);
      }
    });
  }

  /// s (16 x 16, f32) = a b^T for staged 16 x D tiles a and b.
  static ZT_FLASH_FN void scores(float* s, const uint16_t* a, const uint16_t* b) {
    Acc acc;
    Warp::zero(acc);
    ZT_FLASH_UNROLL
    for (int c = 0; c < DK; ++c) {
      typename Warp::FragA fa;
      typename Warp::FragBt fb;
      Warp::load(fa, a + 16 * c, kLd);
      Warp::load(fb, b + 16 * c, kLd);
      Warp::mma(acc, fa, fb);
    }
    Warp::store(s, acc, kLdS);
  }

  /// acc[c] += p v[:, 16c, 16c + 16) for a 16 x 16 tile p and a staged 16 x D tile v.
  static ZT_FLASH_FN void accumulate(Acc (&acc)[DK], const uint16_t* p, const uint16_t* v) {
    typename Warp::FragA fa;
    Warp::load(fa, p, kLdP);
    ZT_FLASH_UNROLL
    for (int c = 0; c < DK; ++c) {
      typename Warp::FragB fb;
      Warp::load(fb, v + 16 * c, kLd);
      Warp::mma(acc[c], fa, fb);
    }
  }

  static ZT_FLASH_FN void zero(Acc (&acc)[DK]) {
    ZT_FLASH_UNROLL
    for (int c = 0; c < DK; ++c) Warp::zero(acc[c]);
  }

  /// Rows [r0, r0 + 16) below `rows` of m's matrix (b, h) = mult * acc, through s.
  static ZT_FLASH_FN void write(const Mat& m, const Task& t, int64_t r0, int64_t rows,
                                Acc (&acc)[DK], float mult, float* s) {
    ZT_FLASH_UNROLL
    for (int c = 0; c < DK; ++c) {
      Warp::store(s, acc[c], kLdS);
      Warp::lanes([&](int lane) {
        for (int i = lane; i < 16 * 16; i += 32) {
          const int r = i / 16, col = i % 16;
          if (r0 + r < rows)
            m.at(t.b, t.h, r0 + r)[16 * c + col] = Warp::from_float(s[r * kLdS + col] * mult);
        }
      });
    }
  }

  static ZT_FLASH_FN void forward(const Params& p, int64_t task, Smem& sm) {
    const Task t = task_of(p, task, p.tq, true);
    const int64_t kend = p.causal && t.r0 + 16 < p.tk ? t.r0 + 16 : p.tk;
    float* m = sm.r[0];
    float* l = sm.r[1];
    stage(sm.x[0], p.q, t, t.r0, p.tq);
    Warp::lanes([&](int lane) {
      if (lane < 16) {
        m[lane] = -INFINITY;
        l[lane] = 0.f;
      }
    });
    // Pass 1: each row's max and sum of exponentials over its visible keys.
    for (int64_t k0 = 0; k0 < kend; k0 += 16) {
      stage(sm.x[1], p.k, t, k0, p.tk);
      scores(sm.s[0], sm.x[0], sm.x[1]);
      Warp::lanes([&](int lane) {
        if (lane >= 16) return;
        const float* s = sm.s[0] + lane * kLdS;
        const int64_t q = t.r0 + lane;
        float mx = m[lane];
        for (int j = 0; j < 16; ++j)
          if (visible(p, q, k0 + j) && s[j] * p.scale > mx) mx = s[j] * p.scale;
        if (mx == -INFINITY) return;  // nothing visible (only with infinite inputs)
        float sum = l[lane] * Warp::exp(m[lane] - mx);
        for (int j = 0; j < 16; ++j)
          if (visible(p, q, k0 + j)) sum += Warp::exp(s[j] * p.scale - mx);
        m[lane] = mx;
        l[lane] = sum;
      });
    }
    // Pass 2: o = sum over key tiles of p v.
    Acc acc[DK];
    zero(acc);
    for (int64_t k0 = 0; k0 < kend; k0 += 16) {
      stage(sm.x[1], p.k, t, k0, p.tk);
      stage(sm.x[2], p.v, t, k0, p.tk);
      scores(sm.s[0], sm.x[0], sm.x[1]);
      Warp::lanes([&](int lane) {  // half a row per lane
        const int r = lane / 2, j0 = lane % 2 * 8;
        const float mr = m[r], inv = 1.f / l[r];
        for (int j = j0; j < j0 + 8; ++j) {
          const bool vis = visible(p, t.r0 + r, k0 + j);
          const float e = vis ? Warp::exp(sm.s[0][r * kLdS + j] * p.scale - mr) * inv : 0.f;
          sm.p[0][r * kLdP + j] = Warp::from_float(e);
        }
      });
      accumulate(acc, sm.p[0], sm.x[2]);
    }
    write(p.o, t, t.r0, p.tq, acc, 1.f, sm.s[0]);
    Warp::lanes([&](int lane) {
      if (lane < 16 && t.r0 + lane < p.tq)
        p.lse[t.bh * p.tq + t.r0 + lane] = m[lane] + Warp::log(l[lane]);
    });
  }

  /// dq for a query tile; also writes the tile's delta = rowsum(dout * o) for dk / dv.
  static ZT_FLASH_FN void backward_dq(const Params& p, int64_t task, Smem& sm) {
    const Task t = task_of(p, task, p.tq, true);
    const int64_t kend = p.causal && t.r0 + 16 < p.tk ? t.r0 + 16 : p.tk;
    float* lse = sm.r[0];
    float* delta = sm.r[1];
    stage(sm.x[0], p.q, t, t.r0, p.tq);
    stage(sm.x[1], p.dout, t, t.r0, p.tq);
    stage(sm.x[2], p.o, t, t.r0, p.tq);
    Warp::lanes([&](int lane) {
      if (lane >= 16) return;
      const int64_t q = t.r0 + lane;
      float d = 0.f;
      for (int c = 0; c < D; ++c)
        d += Warp::to_float(sm.x[1][lane * kLd + c]) * Warp::to_float(sm.x[2][lane * kLd + c]);
      lse[lane] = q < p.tq ? p.lse[t.bh * p.tq + q] : 0.f;
      delta[lane] = d;
      if (q < p.tq) p.delta[t.bh * p.tq + q] = d;
    });
    Acc acc[DK];
    zero(acc);
    for (int64_t k0 = 0; k0 < kend; k0 += 16) {
      stage(sm.x[2], p.k, t, k0, p.tk);
      stage(sm.x[3], p.v, t, k0, p.tk);
      scores(sm.s[0], sm.x[0], sm.x[2]);  // s = q k^T
      scores(sm.s[1], sm.x[1], sm.x[3]);  // dp = dout v^T
      Warp::lanes([&](int lane) {
        const int r = lane / 2, j0 = lane % 2 * 8;
        for (int j = j0; j < j0 + 8; ++j) {
          float ds = 0.f;
          if (visible(p, t.r0 + r, k0 + j)) {
            const float pr = Warp::exp(sm.s[0][r * kLdS + j] * p.scale - lse[r]);
            ds = pr * (sm.s[1][r * kLdS + j] - delta[r]);
          }
          sm.p[0][r * kLdP + j] = Warp::from_float(ds);
        }
      });
      accumulate(acc, sm.p[0], sm.x[2]);  // dq += ds k
    }
    write(p.dq, t, t.r0, p.tq, acc, p.scale, sm.s[0]);
  }

  /// dk and dv for a key tile (after every backward_dq of the batch: reads delta).
  static ZT_FLASH_FN void backward_dkdv(const Params& p, int64_t task, Smem& sm) {
    const Task t = task_of(p, task, p.tk, false);
    const int64_t k0 = t.r0;
    float* lse = sm.r[0];
    float* delta = sm.r[1];
    stage(sm.x[0], p.k, t, k0, p.tk);
    stage(sm.x[1], p.v, t, k0, p.tk);
    Acc dk[DK], dv[DK];
    zero(dk);
    zero(dv);
    // Causal: queries before k0 see none of these keys (k0 is a multiple of 16, as q0).
    for (int64_t q0 = p.causal ? k0 : 0; q0 < p.tq; q0 += 16) {
      stage(sm.x[2], p.q, t, q0, p.tq);
      stage(sm.x[3], p.dout, t, q0, p.tq);
      Warp::lanes([&](int lane) {
        if (lane >= 16) return;
        const bool in = q0 + lane < p.tq;
        lse[lane] = in ? p.lse[t.bh * p.tq + q0 + lane] : 0.f;
        delta[lane] = in ? p.delta[t.bh * p.tq + q0 + lane] : 0.f;
      });
      scores(sm.s[0], sm.x[0], sm.x[2]);  // s^T = k q^T
      scores(sm.s[1], sm.x[1], sm.x[3]);  // dp^T = v dout^T
      Warp::lanes([&](int lane) {         // r: a key of the tile, j: a query
        const int r = lane / 2, j0 = lane % 2 * 8;
        for (int j = j0; j < j0 + 8; ++j) {
          float pr = 0.f, ds = 0.f;
          if (q0 + j < p.tq && visible(p, q0 + j, k0 + r)) {
            pr = Warp::exp(sm.s[0][r * kLdS + j] * p.scale - lse[j]);
            ds = pr * (sm.s[1][r * kLdS + j] - delta[j]);
          }
          sm.p[0][r * kLdP + j] = Warp::from_float(pr);
          sm.p[1][r * kLdP + j] = Warp::from_float(ds);
        }
      });
      accumulate(dv, sm.p[0], sm.x[3]);  // dv += p^T dout
      accumulate(dk, sm.p[1], sm.x[2]);  // dk += ds^T q
    }
    write(p.dk, t, k0, p.tk, dk, p.scale, sm.s[0]);
    write(p.dv, t, k0, p.tk, dv, 1.f, sm.s[0]);
  }
};

/// The warp tasks of a pass: query tiles for the forward and dq, key tiles for dk / dv.
inline int64_t task_count(const Tensor& q4, int64_t rows) {
  return q4.size(0) * q4.size(1) * ((rows + 15) / 16);
}

/// Parameters from 4-D views (n0, n1, T, D); undefined tensors give null matrices.
inline Params params(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                     const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                     const Tensor& lse, const Tensor& delta, double scale, bool causal) {
  ZT_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && head_dim_supported(q.size(3)) &&
               k.size(3) == q.size(3) && v.size(3) == q.size(3) && v.size(2) == k.size(2) &&
               (!causal || q.size(2) == k.size(2)),
           "flash attention: unsupported shapes q ", shape_str(q.sizes()), ", k ",
           shape_str(k.sizes()), ", v ", shape_str(v.sizes()));
  const bool backward = dout.defined();  // the backward stages o; the forward writes it
  return {mat_of(q, "q", true),
          mat_of(k, "k", true),
          mat_of(v, "v", true),
          mat_of(o, "out", backward),
          mat_of(dout, "the output's gradient", true),
          mat_of(dq, "dq", false),
          mat_of(dk, "dk", false),
          mat_of(dv, "dv", false),
          lse.defined() ? static_cast<float*>(lse.data_ptr()) : nullptr,
          delta.defined() ? static_cast<float*>(delta.data_ptr()) : nullptr,
          q.size(1),
          q.size(2),
          k.size(2),
          static_cast<float>(scale),
          causal};
}

/// fn.template operator()<Tiles<Warp<E>, DK>>() for dtype dt (E: Bf16 or F16, the
/// backend's 16-bit types) and head dim d.
template <template <class> class Warp, class Bf16, class F16, class Fn>
void with_tiles(DType dt, int64_t d, Fn&& fn) {
  auto by_dim = [&]<class W>() {
    switch (d) {
      case 32:
        return fn.template operator()<Tiles<W, 2>>();
      case 64:
        return fn.template operator()<Tiles<W, 4>>();
      case 96:
        return fn.template operator()<Tiles<W, 6>>();
      case 128:
        return fn.template operator()<Tiles<W, 8>>();
      default:
        ZT_FAIL("flash attention: head dim ", d, " is not one of 32, 64, 96, 128");
    }
  };
  if (dt == DType::bf16) return by_dim.template operator()<Warp<Bf16>>();
  ZT_CHECK(dt == DType::f16, "flash attention: expected bf16 or f16, got ", dtype_name(dt));
  return by_dim.template operator()<Warp<F16>>();
}

}  // namespace zt::flash
