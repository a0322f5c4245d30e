// Fused attention on the host: the GPU kernels' tiles (core/cuda/flash_tiles.h) on an
// emulated warp whose 32 lanes run one after another between its barriers and whose
// 16 x 16 fragments are float matrices (16-bit inputs are exact in float; the products
// accumulate in f32 as on tensor cores, in a fixed order). It exists so the CPU suite
// runs the GPU algorithm itself (scaled_dot_product_attention takes it on the CPU under
// AttentionKernel::flash); it is not a fast CPU attention. Tasks are independent, so
// the bits do not depend on the thread count.
#include <cstring>
#include <memory>

#include "core/cpu/loops.h"
#include "core/cuda/flash_tiles.h"
#include "core/kernels.h"

namespace zt::cpu {

namespace {

/// The warp backend of flash::Tiles on the host; E is zt::bf16 or zt::f16.
template <typename E>
struct HostWarp {
  struct Frag {
    float v[16][16];  // [row][column] of the logical 16 x 16 matrix
  };
  struct FragA : Frag {};
  struct FragB : Frag {};
  struct FragBt : Frag {};
  struct Acc : Frag {};

  template <typename F>
  static void lanes(F&& f) {
    for (int lane = 0; lane < 32; ++lane) f(lane);
  }
  static void load(FragA& f, const uint16_t* p, int ld) { read(f, p, ld, false); }
  static void load(FragB& f, const uint16_t* p, int ld) { read(f, p, ld, false); }
  static void load(FragBt& f, const uint16_t* p, int ld) { read(f, p, ld, true); }
  static void zero(Acc& a) { std::memset(a.v, 0, sizeof(a.v)); }
  static void mma(Acc& c, const FragA& a, const Frag& b) {
    for (int i = 0; i < 16; ++i)
      for (int n = 0; n < 16; ++n) {
        float s = c.v[i][n];
        for (int k = 0; k < 16; ++k) s += a.v[i][k] * b.v[k][n];
        c.v[i][n] = s;
      }
  }
  static void store(float* p, const Acc& a, int ld) {
    for (int i = 0; i < 16; ++i)
      for (int n = 0; n < 16; ++n) p[i * ld + n] = a.v[i][n];
  }
  static float to_float(uint16_t b) {
    E e;
    e.bits = b;
    return static_cast<float>(e);
  }
  static uint16_t from_float(float f) { return E(f).bits; }
  static void copy16(uint16_t* dst, const uint16_t* src) { std::memcpy(dst, src, 16); }
  static void zero16(uint16_t* dst) { std::memset(dst, 0, 16); }
  static float exp(float x) { return std::exp(x); }
  static float log(float x) { return std::log(x); }

 private:
  // Element (r, c) of the logical matrix at p[r * ld + c] (row-major) or p[c * ld + r].
  static void read(Frag& f, const uint16_t* p, int ld, bool col_major) {
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c) f.v[r][c] = to_float(col_major ? p[c * ld + r] : p[r * ld + c]);
  }
};

enum Pass { kForward, kDq, kDkDv };

template <Pass kPass>
void run(DType dt, int64_t d, const flash::Params& p, int64_t tasks) {
  flash::with_tiles<HostWarp, bf16, f16>(dt, d, [&]<class Tiles>() {
    parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
      auto sm = std::make_unique<typename Tiles::Smem>();
      for (int64_t t = t0; t < t1; ++t) {
        if constexpr (kPass == kForward)
          Tiles::forward(p, t, *sm);
        else if constexpr (kPass == kDq)
          Tiles::backward_dq(p, t, *sm);
        else
          Tiles::backward_dkdv(p, t, *sm);
      }
    });
  });
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, double scale, bool causal) {
  const flash::Params p = flash::params(q, k, v, out, {}, {}, {}, {}, lse, {}, scale, causal);
  run<kForward>(q.dtype(), q.size(3), p, flash::task_count(q, q.size(2)));
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& delta, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& dout,
                              const Tensor& lse, double scale, bool causal) {
  const flash::Params p = flash::params(q, k, v, out, dout, dq, dk, dv, lse, delta, scale, causal);
  run<kDq>(q.dtype(), q.size(3), p, flash::task_count(q, q.size(2)));
  run<kDkDv>(q.dtype(), q.size(3), p, flash::task_count(q, k.size(2)));
}

}  // namespace zt::cpu
