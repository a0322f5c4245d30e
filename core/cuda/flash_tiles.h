// Fused ("flash") attention for 16-bit q, k, v: the tiled algorithm, written once for two
// block backends. On the GPU (core/cuda/flash_attention.cu) a block is a few warps of 32
// threads, its tiles move from shared memory to registers by ldmatrix and multiply on
// tensor cores by mma.sync (m16n8k16, f32 accumulation); on the host
// (core/cpu/flash_attention.cpp) the same code runs on an emulated block: per-lane
// registers are arrays, and ldmatrix, mma and the lane shuffles move values between a
// warp's lanes exactly as the PTX ISA lays the fragments out. The CPU suite thus runs
// the GPU kernels' own indexing, fragment layouts, masks and tails. Pure C++: no CUDA
// header is needed to include it (under nvcc its functions are device functions).
//
// Code between two Block calls is per-lane: Block::each(f) runs f(lane) (on the GPU,
// each thread for its own lane; on the host, for every lane in turn), and a Reg<T> is a
// lane's register (reg[lane]). Block::sync() is the block's barrier for shared memory.
//
// A block owns kRows rows, 16 MT per warp in MT m16 tiles (queries for the forward and
// dq, keys for dk and dv), and walks the other side in steps of kOther = 16 KB rows, which
// all its warps share from shared memory (one load from global memory per block, not per
// warp; a warp's B fragments, loaded once per step, feed all its MT tiles), in a pipeline
// of ST stages: the next ST - 1 steps' tiles are copied asynchronously (cp.async on the
// GPU) while the current one computes. Scores, softmax and probabilities stay in registers (an
// mma's accumulator layout is the next mma's A operand layout, so p feeds p v with no trip through
// memory); nothing of size Tq x Tk is stored: the forward keeps each row's log-sum-exp, the
// backward recomputes p.
//   forward: online softmax over key steps: m = running max, l = running sum of
//            exp(scale s - m) (a step's terms added as a tree, then to l), o rescaled by
//            exp(m_old - m) as m grows; p rounded to 16 bits before p v (as
//            FlashAttention); out = o / l, lse = m + log l
//   backward dq:   delta = rowsum(dout * out); ds = p (dout v^T - delta); dq = scale ds k
//            dk, dv (after dq, reading delta): dv = p^T dout, dk = scale ds^T q
// The dq and dk/dv blocks each own their outputs, so no atomics: results do not depend on
// scheduling. The atomic backward (flash::Backward::atomic, flash_shapes.h) instead finds
// delta first (backward_prepare), then has each dk / dv block also multiply its step's ds,
// staged in shared memory, by its keys and add that share of dq to an f32 buffer with
// atomics (backward_dkdv<true>), and rounds dq from the buffer last (backward_dq_finish):
// five products per tile pair instead of seven, dq's bits in the order the additions land
// (dk and dv keep the split backward's bits). Nor, but for the forward's step size, on the
// tile shape: a row's arithmetic
// is the same whichever warp owns it, and the backward adds the other side's 16-row chunks
// in order whatever the step; the forward's running max moves once per step, so its
// roundings of p and of the rescaled sums follow the step (kOther). Exponentials are base 2 of
// log2(e)-scaled scores (one MUFU.EX2 on the GPU).
//
// Fragments (PTX ISA, mma.m16n8k16 with 16-bit inputs; g = lane / 4, t = lane % 4):
//   A (16 x 16, U4): v[0] = (g, 2t..2t+1), v[1] = (g+8, 2t..), v[2] = (g, 2t+8..),
//                    v[3] = (g+8, 2t+8..), the lower column in the lower 16 bits
//   B (16 x 8, two of U4's registers): (2t..2t+1, g) and (2t+8.., g)
//   C (16 x 8, F4):  v[0..1] = (g, 2t..2t+1), v[2..3] = (g+8, 2t..2t+1)
// A 16 x 16 block of C as two n8 halves is, packed pairwise, an A fragment.
// The backward passes are defined in flash_tiles_backward.h (declared in the struct here,
// which that header completes: include this one).
// The parameters, layout rules and lane register types are in flash_params.h; the tile
// shapes built, and the choice among them, in flash_shapes.h; with_tiles, which picks a
// call's instantiation, in flash_dispatch.h.
// Legend: (n0, n1) the two leading dims (batch, heads), Tq queries, Tk keys, D the head
// dim (q, k and v share it), all tensors with the last dim contiguous.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cuda/flash_params.h"

namespace zt::flash {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// Tiles<Block, DK, MT, KB, ST>: the algorithm for head dim D = 16 DK on one block backend
/// of Block::kWarps warps, each owning MT m16 tiles, in steps of 16 KB rows of the other
/// side, ST of them in shared memory at once (TileShape{16 MT, 16 KB, ST}, flash_shapes.h).
/// Block provides Reg<T>, each(f) (f(lane) for the
/// block's lanes, 32 per warp), sync() (a block barrier), and per warp: ldsm (ldmatrix .x4, plain
/// or transposed, each lane giving one row address), mma<half>(d, a, b) (d += a times B half `half`
/// of b), shfl_xor; ld / st (a lane's plain shared-memory reads and writes), pack / to_float
/// (16-bit conversions), store2, exp2, log2 and 16-byte copies, plain or asynchronous
/// (copy16_async; commit_async closes a group of them, wait_async<N>() lands all groups but
/// the newest N, wait_async<0>() every copy), and atomic_add (an f32 in global memory).
template <class Block, int DK, int MT = 1, int KB = (DK <= 4 ? 2 : 1), int ST = 2>
struct Tiles {
  static constexpr int D = 16 * DK;
  static constexpr int kWarps = Block::kWarps;
  static constexpr int kLanes = 32 * kWarps;
  static constexpr int kWarpRows = 16 * MT;         // a warp's own rows: MT m16 tiles
  static constexpr int kRows = kWarpRows * kWarps;  // the block's own rows
  static constexpr int kOther = 16 * KB;            // the other side's rows per step
  static constexpr int kStages = ST;                // steps in shared memory at once
  static constexpr int kLd = D + 8;  // staged rows: 16 bytes of padding against bank conflicts
  static constexpr int kLdS = kOther + 8;  // staged ds rows (the atomic backward), padded too
  static constexpr int kVec = 8;           // elements per 16-byte copy
  static_assert(kRows % kOther == 0, "a causal walk starts on a step of the other side");
  static_assert(kStages >= 2, "a step computes while the next is copied");
  template <class T>
  using Reg = typename Block::template Reg<T>;

  /// The block's shared memory: two staged tiles of its own rows and their statistics;
  /// kStages buffers (one being computed on, the others being fetched) of the other side's
  /// two tiles and their statistics.
  struct Smem {
    alignas(16) uint16_t own[2][kRows * kLd];
    alignas(16) uint16_t other[kStages][2][kOther * kLd];
    float own_r[2][kRows];
    float other_r[kStages][2][kOther];
  };
  /// The atomic backward's dk / dv pass also stages each step's ds (its keys x the step's
  /// queries, 16-bit) for the product ds^T k.
  struct SmemDq : Smem {
    alignas(16) uint16_t ds[kRows * kLdS];
  };

  static ZT_FLASH_FN bool visible(const Params& p, int64_t q, int64_t key) {
    return key < p.tk && (!p.causal || key <= q);
  }
  /// Whether every key of [k0, k0 + nk) is visible to every query from q0 on: a step
  /// clear of the mask and the key tail skips the per-element test (block-uniform).
  static ZT_FLASH_FN bool all_visible(const Params& p, int64_t q0, int64_t k0, int nk) {
    return k0 + nk <= p.tk && (!p.causal || k0 + nk - 1 <= q0);
  }
  /// f(masked) with masked a std::bool_constant, true unless `full`: a step clear of the
  /// mask and the tails (`full`, block-uniform) runs code with no per-element test.
  template <class F>
  static ZT_FLASH_FN void masked_or_not(bool full, F&& f) {
    if (full)
      f(std::false_type{});
    else
      f(std::true_type{});
  }
  /// Lane ln's accumulator element e of an n8 block of its warp's m16 tile i: row
  /// 16 (MT w + i) + g + 8 (e / 2) of the block's rows (w = ln / 32 its warp), column
  /// 2t + e % 2 of the n8 block.
  static ZT_FLASH_FN int row_of(int ln, int i, int e) {
    return kWarpRows * (ln / 32) + 16 * i + ln % 32 / 4 + 8 * (e / 2);
  }
  static ZT_FLASH_FN int col_of(int ln, int e) { return 2 * (ln % 4) + e % 2; }

  /// The block's tile: matrix (b, h) and its first row r0. Query tiles go longest first
  /// (under the causal mask the last tile sees the most keys); key tiles in order.
  struct Task {
    int64_t b, h, bh, r0;
  };
  static ZT_FLASH_FN Task task_of(const Params& p, int64_t task, int64_t rows, bool last_first) {
    const int64_t tiles = (rows + kRows - 1) / kRows, bh = task / tiles, i = task % tiles;
    return {bh / p.n1, bh % p.n1, bh, (last_first ? tiles - 1 - i : i) * kRows};
  }
  /// Blocks of a pass over `rows` own rows (Tq for the forward and dq, Tk for dk / dv).
  static int64_t tasks(const Params& p, int64_t rows) {
    return p.matrices * ((rows + kRows - 1) / kRows);
  }

  /// Rows [r0, r0 + N) of m's matrix (b, h) into dst; rows at or past `rows` read as 0.
  /// The caller syncs before (no lane still reads dst) and after (before any lane does);
  /// kAsync copies land only at the Block::wait_async that covers their group (cp.async on
  /// the GPU). Where the lanes divide into whole rows of 16-byte chunks (every head dim but
  /// 96), a lane copies one column of every kLanes / kPerRow-th row: its source address is
  /// found once and then stepped, with no division or 64-bit product per chunk.
  template <int N, bool kAsync = false>
  static ZT_FLASH_FN void stage(uint16_t* dst, const Mat& m, const Task& t, int64_t r0,
                                int64_t rows) {
    constexpr int kPerRow = D / kVec, kChunks = N * kPerRow;
    auto copy = [](uint16_t* d, const uint16_t* src) {
      if constexpr (kAsync)
        Block::copy16_async(d, src);
      else
        Block::copy16(d, src);
    };
    Block::each([&](int ln) {
      if constexpr (kLanes % kPerRow == 0) {
        constexpr int kRowStep = kLanes / kPerRow;
        const int r = ln / kPerRow, c = ln % kPerRow * kVec;
        const int64_t left = rows - r0 - r;  // the matrix's rows from this lane's first on
        const int64_t first = t.b * m.s0 + t.h * m.s1 + (r0 + r) * m.row + c;
        ZT_FLASH_UNROLL
        for (int k = 0; k < (kChunks + kLanes - 1) / kLanes; ++k) {
          if (kChunks % kLanes != 0 && r + k * kRowStep >= N) break;
          uint16_t* d = dst + (r + k * kRowStep) * kLd + c;
          if (k * kRowStep < left)
            copy(d, m.p + first + k * kRowStep * m.row);
          else
            Block::zero16(d);
        }
      } else {
        for (int i = ln; i < kChunks; i += kLanes) {
          const int r = i / kPerRow, c = i % kPerRow * kVec;
          if (r0 + r >= rows)
            Block::zero16(dst + r * kLd + c);
          else
            copy(dst + r * kLd + c, m.at(t.b, t.h, r0 + r) + c);
        }
      }
    });
  }

  /// Walks the other side in steps of kOther rows from `first` to `end`, kStages deep:
  /// steps i + 1 .. i + kStages - 1 are being copied (fetch(row, buffer), one group of
  /// copies per step) while step i computes (compute(i's first row, buffer)). One barrier
  /// per step: after it, step i's copies have landed and every lane is done with step
  /// i - 1, whose buffer step i + kStages - 1 then reuses.
  template <class Fetch, class Compute>
  static ZT_FLASH_FN void walk(int64_t first, int64_t end, Fetch&& fetch, Compute&& compute) {
    const int64_t steps = end > first ? (end - first + kOther - 1) / kOther : 0;
    ZT_FLASH_UNROLL
    for (int i = 0; i + 1 < kStages; ++i) {
      if (i < steps) fetch(first + i * kOther, i);
      Block::commit_async();
    }
    for (int64_t i = 0; i < steps; ++i) {
      Block::template wait_async<kStages - 2>();
      Block::sync();
      const int64_t next = i + kStages - 1;
      if (next < steps) fetch(first + next * kOther, static_cast<int>(next % kStages));
      Block::commit_async();
      compute(first + i * kOther, static_cast<int>(i % kStages));
    }
  }

  /// The A fragment of columns [16c, 16c + 16) of the warp's m16 tile i of a staged tile
  /// of the block's rows. Lane l gives the address of row l % 8 of 8 x 8 matrix mi = l / 8:
  /// rows 8 (mi % 2), columns 8 (mi / 2).
  static ZT_FLASH_FN void load_a(Reg<U4>& a, const uint16_t* tile, int i, int c) {
    Block::ldsm(
        a,
        [&](int ln) {
          const int l = ln % 32, mi = l / 8;
          return tile + (kWarpRows * (ln / 32) + 16 * i + l % 8 + 8 * (mi % 2)) * kLd + 16 * c +
                 8 * (mi / 2);
        },
        false);
  }
  /// Every A fragment of the warp's rows of a staged tile: a[i][c] for m16 tile i,
  /// columns [16c, 16c + 16).
  static ZT_FLASH_FN void load_rows(Reg<U4> (&a)[MT][DK], const uint16_t* tile) {
    ZT_FLASH_UNROLL
    for (int i = 0; i < MT; ++i) {
      ZT_FLASH_UNROLL
      for (int c = 0; c < DK; ++c) load_a(a[i][c], tile, i, c);
    }
  }
  /// B fragments (two n8 halves) of a staged tile's transpose: its rows [16 kb, 16 kb + 16)
  /// are the n index, columns [16c, 16c + 16) the k index (for a b^T with b row by row).
  static ZT_FLASH_FN void load_bt(Reg<U4>& b, const uint16_t* tile, int kb, int c) {
    Block::ldsm(
        b,
        [&](int ln) {
          const int l = ln % 32, mi = l / 8;
          return tile + (16 * kb + 8 * (mi / 2) + l % 8) * kLd + 16 * c + 8 * (mi % 2);
        },
        false);
  }
  /// B fragments (two n8 halves) of a staged tile itself: its rows [16 kb, 16 kb + 16)
  /// are the k index, columns [16c, 16c + 16) the n index; transposed on load.
  static ZT_FLASH_FN void load_b(Reg<U4>& b, const uint16_t* tile, int kb, int c) {
    Block::ldsm(
        b,
        [&](int ln) {
          const int l = ln % 32, mi = l / 8;
          return tile + (16 * kb + 8 * (mi % 2) + l % 8) * kLd + 16 * c + 8 * (mi / 2);
        },
        true);
  }

  /// Every accumulator of the warp's m16 tiles to 0.
  template <int N>
  static ZT_FLASH_FN void zero(Reg<F4> (&c)[MT][N]) {
    Block::each([&](int ln) {
      ZT_FLASH_UNROLL
      for (int i = 0; i < MT; ++i) {
        ZT_FLASH_UNROLL
        for (int j = 0; j < N; ++j) {
          ZT_FLASH_UNROLL
          for (int e = 0; e < 4; ++e) c[i][j][ln].v[e] = 0.f;
        }
      }
    });
  }

  /// s[i] (the warp's m16 tile i x kOther as 2 KB n8 blocks) = a b^T over D, for A
  /// fragments a of the rows and a staged kOther x D tile b.
  static ZT_FLASH_FN void scores(Reg<F4> (&s)[MT][2 * KB], const Reg<U4> (&a)[MT][DK],
                                 const uint16_t* b) {
    zero(s);
    ZT_FLASH_UNROLL
    for (int kb = 0; kb < KB; ++kb) {
      ZT_FLASH_UNROLL
      for (int c = 0; c < DK; ++c) {
        Reg<U4> f;
        load_bt(f, b, kb, c);
        ZT_FLASH_UNROLL
        for (int i = 0; i < MT; ++i) {
          Block::template mma<0>(s[i][2 * kb], a[i][c], f);
          Block::template mma<1>(s[i][2 * kb + 1], a[i][c], f);
        }
      }
    }
  }

  /// acc[i] (16 x D as 2 DK n8 blocks) += p[i] v for A fragments p (the warp's m16 tile i
  /// x kOther, 16 columns each) and a staged kOther x D tile v. The 16-row chunks of v add
  /// in order.
  static ZT_FLASH_FN void accumulate(Reg<F4> (&acc)[MT][2 * DK], const Reg<U4> (&p)[MT][KB],
                                     const uint16_t* v) {
    ZT_FLASH_UNROLL
    for (int kb = 0; kb < KB; ++kb) {
      ZT_FLASH_UNROLL
      for (int c = 0; c < DK; ++c) {
        Reg<U4> f;
        load_b(f, v, kb, c);
        ZT_FLASH_UNROLL
        for (int i = 0; i < MT; ++i) {
          Block::template mma<0>(acc[i][2 * c], p[i][kb], f);
          Block::template mma<1>(acc[i][2 * c + 1], p[i][kb], f);
        }
      }
    }
  }

  /// Lane ln's values x (2 KB n8 blocks of accumulator layout) as A fragments, rounded
  /// to 16 bits: an accumulator block pair is, packed pairwise, an A fragment.
  static ZT_FLASH_FN void pack_a(Reg<U4> (&a)[KB], int ln, const float (&x)[2 * KB][4]) {
    ZT_FLASH_UNROLL
    for (int kb = 0; kb < KB; ++kb) {
      a[kb][ln].v[0] = Block::pack(x[2 * kb][0], x[2 * kb][1]);
      a[kb][ln].v[1] = Block::pack(x[2 * kb][2], x[2 * kb][3]);
      a[kb][ln].v[2] = Block::pack(x[2 * kb + 1][0], x[2 * kb + 1][1]);
      a[kb][ln].v[3] = Block::pack(x[2 * kb + 1][2], x[2 * kb + 1][3]);
    }
  }

  /// v[0] op v[1] op ... op v[N - 1] as a balanced tree (pairs, then pairs of pairs): log2 N
  /// dependent operations where a running fold has N - 1. N a power of 2.
  template <int N, class Op>
  static ZT_FLASH_FN float tree(const float (&v)[N], Op op) {
    if constexpr (N == 1) {
      return v[0];
    } else {
      float pairs[N / 2];
      ZT_FLASH_UNROLL
      for (int k = 0; k < N / 2; ++k) pairs[k] = op(v[2 * k], v[2 * k + 1]);
      return tree(pairs, op);
    }
  }

  /// x = max (or sum) over the four lanes of each quad, which share rows g and g + 8.
  template <bool kMax>
  static ZT_FLASH_FN void quad_reduce(Reg<F2>& x) {
    ZT_FLASH_UNROLL
    for (int mask = 1; mask <= 2; mask *= 2) {
      Reg<F2> other = x;
      Block::shfl_xor(other, mask);
      Block::each([&](int ln) {
        ZT_FLASH_UNROLL
        for (int h = 0; h < 2; ++h)
          x[ln].v[h] = kMax ? fmaxf(x[ln].v[h], other[ln].v[h]) : x[ln].v[h] + other[ln].v[h];
      });
    }
  }

  /// The block's rows [r0, r0 + kRows) below `rows` of m's matrix (b, h) = acc times
  /// each lane's row factor (mult[i].v[0] for row g of m16 tile i, v[1] for row g + 8).
  static ZT_FLASH_FN void write(const Mat& m, const Task& t, int64_t r0, int64_t rows,
                                const Reg<F4> (&acc)[MT][2 * DK], const Reg<F2> (&mult)[MT]) {
    Block::each([&](int ln) {
      ZT_FLASH_UNROLL
      for (int i = 0; i < MT; ++i) {
        ZT_FLASH_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int64_t r = r0 + row_of(ln, i, 2 * h);
          if (r >= rows) continue;
          uint16_t* dst = m.at(t.b, t.h, r) + 2 * (ln % 4);
          const float f = mult[i][ln].v[h];
          ZT_FLASH_UNROLL
          for (int j = 0; j < 2 * DK; ++j)
            Block::store2(dst + 8 * j, acc[i][j][ln].v[2 * h] * f, acc[i][j][ln].v[2 * h + 1] * f);
        }
      }
    });
  }
  /// The same factor f for every row.
  static ZT_FLASH_FN void write(const Mat& m, const Task& t, int64_t r0, int64_t rows,
                                const Reg<F4> (&acc)[MT][2 * DK], float f) {
    Reg<F2> mult[MT];
    Block::each([&](int ln) {
      ZT_FLASH_UNROLL
      for (int i = 0; i < MT; ++i) mult[i][ln] = {{f, f}};
    });
    write(m, t, r0, rows, acc, mult);
  }

  static ZT_FLASH_FN void forward(const Params& p, int64_t task, Smem& sm) {
    const Task t = task_of(p, task, p.tq, true);
    const int64_t kend = p.causal && t.r0 + kRows < p.tk ? t.r0 + kRows : p.tk;
    const float scale2 = p.scale * kLog2e;
    stage<kRows>(sm.own[0], p.q, t, t.r0, p.tq);
    Block::sync();
    Reg<U4> qa[MT][DK];
    load_rows(qa, sm.own[0]);
    Reg<F4> o[MT][2 * DK];
    zero(o);
    Reg<F2> m[MT], l[MT];  // rows g and g + 8: running max (log2 units), this lane's partial sum
    Block::each([&](int ln) {
      ZT_FLASH_UNROLL
      for (int i = 0; i < MT; ++i) {
        m[i][ln] = {{-INFINITY, -INFINITY}};
        l[i][ln] = {{0.f, 0.f}};
      }
    });
    auto fetch = [&](int64_t k0, int buf) {
      stage<kOther, true>(sm.other[buf][0], p.k, t, k0, p.tk);
      stage<kOther, true>(sm.other[buf][1], p.v, t, k0, p.tk);
    };
    walk(0, kend, fetch, [&](int64_t k0, int buf) {
      Reg<F4> s[MT][2 * KB];
      scores(s, qa, sm.other[buf][0]);
      Reg<F2> mx[MT];  // the rows' new maxima
      masked_or_not(all_visible(p, t.r0, k0, kOther), [&](auto masked) {
        Block::each([&](int ln) {
          ZT_FLASH_UNROLL
          for (int i = 0; i < MT; ++i) {
            float half[2][4 * KB];  // the lane's scaled scores of rows g and g + 8
            ZT_FLASH_UNROLL
            for (int j = 0; j < 2 * KB; ++j) {
              ZT_FLASH_UNROLL
              for (int e = 0; e < 4; ++e) {
                float& x = s[i][j][ln].v[e];
                x = !masked || visible(p, t.r0 + row_of(ln, i, e), k0 + 8 * j + col_of(ln, e))
                        ? x * scale2
                        : -INFINITY;
                half[e / 2][2 * j + e % 2] = x;
              }
            }
            ZT_FLASH_UNROLL
            for (int h = 0; h < 2; ++h)
              mx[i][ln].v[h] =
                  fmaxf(m[i][ln].v[h], tree(half[h], [](float a, float b) { return fmaxf(a, b); }));
          }
        });
      });
      ZT_FLASH_UNROLL
      for (int i = 0; i < MT; ++i) quad_reduce<true>(mx[i]);
      Reg<U4> pa[MT][KB];  // p as the A operand of p v
      Block::each([&](int ln) {
        ZT_FLASH_UNROLL
        for (int i = 0; i < MT; ++i) {
          float shift[2], alpha[2];
          ZT_FLASH_UNROLL
          for (int h = 0; h < 2; ++h) {
            shift[h] = mx[i][ln].v[h] == -INFINITY ? 0.f : mx[i][ln].v[h];  // nothing visible yet
            alpha[h] = Block::exp2(m[i][ln].v[h] - shift[h]);
            m[i][ln].v[h] = mx[i][ln].v[h];
            l[i][ln].v[h] *= alpha[h];
          }
          ZT_FLASH_UNROLL
          for (int j = 0; j < 2 * DK; ++j) {
            ZT_FLASH_UNROLL
            for (int e = 0; e < 4; ++e) o[i][j][ln].v[e] *= alpha[e / 2];
          }
          float pr[2 * KB][4], half[2][4 * KB];
          ZT_FLASH_UNROLL
          for (int j = 0; j < 2 * KB; ++j) {
            ZT_FLASH_UNROLL
            for (int e = 0; e < 4; ++e) {
              pr[j][e] = Block::exp2(s[i][j][ln].v[e] - shift[e / 2]);  // 0 where masked
              half[e / 2][2 * j + e % 2] = pr[j][e];
            }
          }
          ZT_FLASH_UNROLL
          for (int h = 0; h < 2; ++h)
            l[i][ln].v[h] += tree(half[h], [](float a, float b) { return a + b; });
          pack_a(pa[i], ln, pr);
        }
      });
      accumulate(o, pa, sm.other[buf][1]);
    });
    Reg<F2> inv[MT];
    ZT_FLASH_UNROLL
    for (int i = 0; i < MT; ++i) quad_reduce<false>(l[i]);
    Block::each([&](int ln) {
      ZT_FLASH_UNROLL
      for (int i = 0; i < MT; ++i) {
        ZT_FLASH_UNROLL
        for (int h = 0; h < 2; ++h) {
          inv[i][ln].v[h] = 1.f / l[i][ln].v[h];
          const int64_t r = t.r0 + row_of(ln, i, 2 * h);
          if (ln % 4 == 0 && r < p.tq)
            p.lse[t.bh * p.tq + r] = (m[i][ln].v[h] + Block::log2(l[i][ln].v[h])) * kLn2;
        }
      }
    });
    write(p.o, t, t.r0, p.tq, o, inv);
  }

  /// rowsum(dout * out) over one query row: out's row o read in 16-byte chunks, dout's
  /// columns [c, c + kVec) as dout_chunk(c, chunk) gives them; in column order.
  template <class DoutChunk>
  static ZT_FLASH_FN float row_delta(const uint16_t* o, DoutChunk&& dout_chunk);

  /// dq for a query tile; also writes the tile's delta = rowsum(dout * out) for dk / dv.
  static ZT_FLASH_FN void backward_dq(const Params& p, int64_t task, Smem& sm);

  /// dk and dv for a key tile (after every backward_dq, or backward_prepare, of the batch:
  /// reads delta); kAtomicDq: also adds the tile's share of dq to p.dq_acc (sm is an SmemDq).
  template <bool kAtomicDq = false>
  static ZT_FLASH_FN void backward_dkdv(const Params& p, int64_t task, Smem& sm);

  /// p.dq_acc's rows [q0, q0 + kOther) += ds^T k, for a step's ds (the block's kRows keys x
  /// the step's queries, staged 16-bit in ds) and the block's keys (staged in k). Warp w
  /// computes the 16 x 16 blocks x kWarps + w of the KB x DK of the step's dq (query chunk
  /// j / DK, head-dim columns 16 (j % DK) for block j) over all kRows keys, then adds them
  /// in with atomics.
  static ZT_FLASH_FN void add_dq(const Params& p, const Task& t, int64_t q0, const uint16_t* ds,
                                 const uint16_t* k);

  /// The atomic backward's first pass, over query tiles: delta = rowsum(dout * out), in the
  /// split backward's order (so p, ds, dk and dv keep their bits). No shared memory.
  static ZT_FLASH_FN void backward_prepare(const Params& p, int64_t task);

  /// The atomic backward's last pass, over query tiles: dq = scale dq_acc, rounded to 16
  /// bits. No shared memory.
  static ZT_FLASH_FN void backward_dq_finish(const Params& p, int64_t task);
};

}  // namespace zt::flash

#include "core/cuda/flash_tiles_backward.h"  // the backward passes' definitions
