// The host's block backend of the fused attention tiles (core/cuda/flash_tiles.h): an
// emulated block of kWarps warps. A lane register is an array over the block's lanes;
// ldmatrix, mma.sync m16n8k16 and the lane shuffles gather and scatter a warp's 32 of them
// exactly as the PTX ISA lays the fragments out (the layouts at the top of
// flash_tiles.h); the products are exact 16-bit values multiplied and summed in f32 in a
// fixed order; an asynchronous copy lands at the wait_async that covers its group. Used by
// core/cpu/flash_attention.cpp, and by the tests, which check its barriers by deriving
// a backend that records every shared-memory access.
#pragma once

#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <vector>

#include "core/cuda/flash_tiles.h"

namespace zt::flash {

/// The block backend of flash::Tiles on the host: kWarps warps of 32 lanes; E is zt::bf16
/// or zt::f16. Lanes run in turn, so sync() has nothing to wait for.
template <typename E, int kWarpCount>
struct HostBlock {
  static constexpr int kWarps = kWarpCount;
  static constexpr int kLanes = 32 * kWarps;

  template <class T>
  struct Reg {
    T v[kLanes];
    T& operator[](int lane) { return v[lane]; }
    const T& operator[](int lane) const { return v[lane]; }
  };

  template <typename F>
  static void each(F&& f) {
    for (int lane = 0; lane < kLanes; ++lane) f(lane);
  }
  static void sync() {}

  /// ldmatrix .x4 on each warp: lane l gives the address of row l % 8 of matrix l / 8;
  /// register i of lane l receives matrix i's elements (l / 4, 2 (l % 4) + {0, 1}), or
  /// with `trans` its elements (2 (l % 4) + {0, 1}, l / 4).
  template <typename F>
  static void ldsm(Reg<U4>& r, F&& addr, bool trans) {
    for (int w = 0; w < kWarps; ++w) {
      const uint16_t* rows[32];
      for (int l = 0; l < 32; ++l) rows[l] = addr(32 * w + l);
      for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < 4; ++i) {
          const uint16_t* const* m = rows + 8 * i;
          const uint16_t lo = trans ? m[2 * t][g] : m[g][2 * t];
          const uint16_t hi = trans ? m[2 * t + 1][g] : m[g][2 * t + 1];
          r[32 * w + l].v[i] = static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16;
        }
      }
    }
  }

  /// On each warp, d += a b for the A fragment a (16 x 16) and the B fragment in
  /// registers 2 kHalf and 2 kHalf + 1 of b (16 x 8), the layouts of mma.sync m16n8k16.
  template <int kHalf>
  static void mma(Reg<F4>& d, const Reg<U4>& a, const Reg<U4>& b) {
    for (int w = 0; w < kWarps; ++w) {
      float A[16][16], B[16][8];
      for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4, ln = 32 * w + l;
        for (int i = 0; i < 4; ++i) {
          const int row = g + 8 * (i % 2), col = 2 * t + 8 * (i / 2);
          A[row][col] = low(a[ln].v[i]);
          A[row][col + 1] = high(a[ln].v[i]);
        }
        for (int i = 0; i < 2; ++i) {
          B[2 * t + 8 * i][g] = low(b[ln].v[2 * kHalf + i]);
          B[2 * t + 8 * i + 1][g] = high(b[ln].v[2 * kHalf + i]);
        }
      }
      for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4, ln = 32 * w + l;
        for (int e = 0; e < 4; ++e) {
          const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
          float acc = d[ln].v[e];
          for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
          d[ln].v[e] = acc;
        }
      }
    }
  }

  /// Every lane takes lane (l ^ mask)'s values (mask < 32: within its warp).
  static void shfl_xor(Reg<F2>& x, int mask) {
    const Reg<F2> before = x;
    for (int l = 0; l < kLanes; ++l) x[l] = before[l ^ mask];
  }

  static float to_float(uint16_t b) {
    E e;
    e.bits = b;
    return static_cast<float>(e);
  }
  /// Two values rounded to 16 bits, the first in the lower half.
  static uint32_t pack(float lo, float hi) {
    return static_cast<uint32_t>(E(lo).bits) | static_cast<uint32_t>(E(hi).bits) << 16;
  }
  static void store2(uint16_t* dst, float lo, float hi) {
    const uint32_t w = pack(lo, hi);
    std::memcpy(dst, &w, 4);
  }
  template <class T>
  static T ld(const T* p, int /*lane*/) {
    return *p;
  }
  template <class T>
  static void st(T* p, T v, int /*lane*/) {
    *p = v;
  }
  static void copy16(uint16_t* dst, const uint16_t* src) { std::memcpy(dst, src, 16); }
  static void zero16(uint16_t* dst) { std::memset(dst, 0, 16); }
  /// As cp.async: the copy lands only at a wait_async that covers its group, so a read of
  /// the tile before that wait sees the old contents here as it could on the GPU.
  static void copy16_async(uint16_t* dst, const uint16_t* src) { open().push_back({dst, src}); }
  /// Closes the group of the copies issued since the last commit.
  static void commit_async() {
    committed().push_back(std::move(open()));
    open().clear();
  }
  /// Lands every committed group but the newest kPending; kPending 0: every copy.
  template <int kPending = 0>
  static void wait_async() {
    if (kPending == 0) commit_async();
    while (committed().size() > static_cast<size_t>(kPending)) {
      for (const Copy& c : committed().front()) std::memcpy(c.dst, c.src, 16);
      committed().pop_front();
    }
  }
  /// Blocks run on several threads at once: their additions to one f32 are atomic here too.
  static void atomic_add(float* p, float v) {
    std::atomic_ref<float>(*p).fetch_add(v, std::memory_order_relaxed);
  }
  static float exp2(float x) { return std::exp2(x); }
  static float log2(float x) { return std::log2(x); }

 private:
  struct Copy {
    uint16_t* dst;
    const uint16_t* src;
  };
  static std::vector<Copy>& open() {  // issued since the last commit
    thread_local std::vector<Copy> copies;
    return copies;
  }
  static std::deque<std::vector<Copy>>& committed() {  // oldest group first
    thread_local std::deque<std::vector<Copy>> groups;
    return groups;
  }
  static float low(uint32_t w) { return to_float(static_cast<uint16_t>(w & 0xffffu)); }
  static float high(uint32_t w) { return to_float(static_cast<uint16_t>(w >> 16)); }
};

}  // namespace zt::flash
