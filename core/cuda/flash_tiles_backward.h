// Fused attention (core/cuda/flash_tiles.h): the backward passes of flash::Tiles, defined
// here and declared in the struct, whose header includes this one at its end. The split
// backward: backward_dq (delta, then dq), then backward_dkdv; the atomic backward:
// backward_prepare (delta), backward_dkdv<true> (dk, dv and each key tile's share of dq
// through add_dq's atomics), then backward_dq_finish. The algorithm, the fragment layouts
// and the block backends' contract are at the top of flash_tiles.h.
#pragma once

#include "core/cuda/flash_tiles.h"

namespace zt::flash {

template <class Block, int DK, int MT, int KB, int ST>
template <class DoutChunk>
ZT_FLASH_FN float Tiles<Block, DK, MT, KB, ST>::row_delta(const uint16_t* o,
                                                          DoutChunk&& dout_chunk) {
  float d = 0.f;
  for (int c = 0; c < D; c += kVec) {
    alignas(16) uint16_t chunk[kVec], dchunk[kVec];  // copied as one 16-byte vector
    Block::copy16(chunk, o + c);
    dout_chunk(c, dchunk);
    ZT_FLASH_UNROLL
    for (int x = 0; x < kVec; ++x) d += Block::to_float(dchunk[x]) * Block::to_float(chunk[x]);
  }
  return d;
}

template <class Block, int DK, int MT, int KB, int ST>
ZT_FLASH_FN void Tiles<Block, DK, MT, KB, ST>::backward_dq(const Params& p, int64_t task,
                                                           Smem& sm) {
  const Task t = task_of(p, task, p.tq, true);
  const int64_t kend = p.causal && t.r0 + kRows < p.tk ? t.r0 + kRows : p.tk;
  const float scale2 = p.scale * kLog2e;
  stage<kRows>(sm.own[0], p.q, t, t.r0, p.tq);
  stage<kRows>(sm.own[1], p.dout, t, t.r0, p.tq);
  Block::sync();
  Block::each([&](int ln) {  // a row per lane: delta from dout (staged) and out
    for (int row = ln; row < kRows; row += kLanes) {
      const int64_t q = t.r0 + row;
      float d = 0.f;
      if (q < p.tq) {
        d = row_delta(p.o.at(t.b, t.h, q), [&](int c, uint16_t(&chunk)[kVec]) {
          Block::copy16(chunk, &sm.own[1][row * kLd + c]);  // from the staged dout
        });
        p.delta[t.bh * p.tq + q] = d;
      }
      Block::st(&sm.own_r[0][row], q < p.tq ? p.lse[t.bh * p.tq + q] * kLog2e : 0.f, ln);
      Block::st(&sm.own_r[1][row], d, ln);
    }
  });
  Block::sync();
  Reg<U4> qa[MT][DK], da[MT][DK];
  load_rows(qa, sm.own[0]);
  load_rows(da, sm.own[1]);
  Reg<F2> lse[MT], delta[MT];  // rows g and g + 8
  Block::each([&](int ln) {
    ZT_FLASH_UNROLL
    for (int i = 0; i < MT; ++i) {
      ZT_FLASH_UNROLL
      for (int h = 0; h < 2; ++h) {
        lse[i][ln].v[h] = Block::ld(&sm.own_r[0][row_of(ln, i, 2 * h)], ln);
        delta[i][ln].v[h] = Block::ld(&sm.own_r[1][row_of(ln, i, 2 * h)], ln);
      }
    }
  });
  Reg<F4> dq[MT][2 * DK];
  zero(dq);
  auto fetch = [&](int64_t k0, int buf) {
    stage<kOther, true>(sm.other[buf][0], p.k, t, k0, p.tk);
    stage<kOther, true>(sm.other[buf][1], p.v, t, k0, p.tk);
  };
  walk(0, kend, fetch, [&](int64_t k0, int buf) {
    Reg<F4> s[MT][2 * KB], dp[MT][2 * KB];
    scores(s, qa, sm.other[buf][0]);   // q k^T
    scores(dp, da, sm.other[buf][1]);  // dout v^T
    Reg<U4> dsa[MT][KB];
    masked_or_not(all_visible(p, t.r0, k0, kOther), [&](auto masked) {
      Block::each([&](int ln) {
        ZT_FLASH_UNROLL
        for (int i = 0; i < MT; ++i) {
          float ds[2 * KB][4];
          ZT_FLASH_UNROLL
          for (int j = 0; j < 2 * KB; ++j) {
            ZT_FLASH_UNROLL
            for (int e = 0; e < 4; ++e) {
              const int h = e / 2;
              ds[j][e] = !masked || visible(p, t.r0 + row_of(ln, i, e), k0 + 8 * j + col_of(ln, e))
                             ? Block::exp2(s[i][j][ln].v[e] * scale2 - lse[i][ln].v[h]) *
                                   (dp[i][j][ln].v[e] - delta[i][ln].v[h])
                             : 0.f;
            }
          }
          pack_a(dsa[i], ln, ds);
        }
      });
    });
    accumulate(dq, dsa, sm.other[buf][0]);  // dq += ds k
  });
  write(p.dq, t, t.r0, p.tq, dq, p.scale);
}

template <class Block, int DK, int MT, int KB, int ST>
template <bool kAtomicDq>
ZT_FLASH_FN void Tiles<Block, DK, MT, KB, ST>::backward_dkdv(const Params& p, int64_t task,
                                                             Smem& sm) {
  const Task t = task_of(p, task, p.tk, false);
  const int64_t k0 = t.r0;
  const float scale2 = p.scale * kLog2e;
  stage<kRows>(sm.own[0], p.k, t, k0, p.tk);
  stage<kRows>(sm.own[1], p.v, t, k0, p.tk);
  Reg<F4> dk[MT][2 * DK], dv[MT][2 * DK];
  zero(dk);
  zero(dv);
  auto fetch = [&](int64_t q0, int buf) {
    stage<kOther, true>(sm.other[buf][0], p.q, t, q0, p.tq);
    stage<kOther, true>(sm.other[buf][1], p.dout, t, q0, p.tq);
    Block::each([&](int ln) {  // a fixed trip count: no loop where the lanes cover the step
      const int64_t row0 = t.bh * p.tq + q0;
      ZT_FLASH_UNROLL
      for (int k = 0; k < (kOther + kLanes - 1) / kLanes; ++k) {
        const int r = ln + k * kLanes;
        if (kOther % kLanes != 0 && r >= kOther) break;
        const bool in = q0 + r < p.tq;
        Block::st(&sm.other_r[buf][0][r], in ? p.lse[row0 + r] * kLog2e : 0.f, ln);
        Block::st(&sm.other_r[buf][1][r], in ? p.delta[row0 + r] : 0.f, ln);
      }
    });
  };
  // Causal: queries before k0 see none of these keys (k0 is a multiple of kRows, so
  // of kOther: the walk starts on a step).
  walk(p.causal ? k0 : 0, p.tq, fetch, [&](int64_t q0, int buf) {
    const uint16_t* qt = sm.other[buf][0];
    const uint16_t* dt = sm.other[buf][1];
    const float* lse = sm.other_r[buf][0];
    const float* delta = sm.other_r[buf][1];
    Reg<F4> s[MT][2 * KB], dp[MT][2 * KB];  // rows: the warp's keys; columns: the queries
    {
      Reg<U4> a[MT][DK];
      load_rows(a, sm.own[0]);
      scores(s, a, qt);  // k q^T
      load_rows(a, sm.own[1]);
      scores(dp, a, dt);  // v dout^T
    }
    // Every query of the step below tq and at or past the tile's last key: no test.
    Reg<U4> pa[MT][KB], dsa[MT][KB];
    masked_or_not(q0 + kOther <= p.tq && all_visible(p, q0, k0, kRows), [&](auto masked) {
      Block::each([&](int ln) {
        ZT_FLASH_UNROLL
        for (int i = 0; i < MT; ++i) {
          float pr[2 * KB][4], ds[2 * KB][4];
          ZT_FLASH_UNROLL
          for (int j = 0; j < 2 * KB; ++j) {
            ZT_FLASH_UNROLL
            for (int e = 0; e < 4; ++e) {
              const int qc = 8 * j + col_of(ln, e);  // the query's column in the step
              const int64_t q = q0 + qc;
              const bool vis = !masked || (q < p.tq && visible(p, q, k0 + row_of(ln, i, e)));
              pr[j][e] =
                  vis ? Block::exp2(s[i][j][ln].v[e] * scale2 - Block::ld(&lse[qc], ln)) : 0.f;
              ds[j][e] = pr[j][e] * (dp[i][j][ln].v[e] - Block::ld(&delta[qc], ln));
            }
          }
          pack_a(pa[i], ln, pr);
          pack_a(dsa[i], ln, ds);
          if constexpr (kAtomicDq) {  // ds as the keys x queries tile, rounded as dsa
            ZT_FLASH_UNROLL
            for (int j = 0; j < 2 * KB; ++j) {
              ZT_FLASH_UNROLL
              for (int h = 0; h < 2; ++h)
                Block::store2(static_cast<SmemDq&>(sm).ds + row_of(ln, i, 2 * h) * kLdS + 8 * j +
                                  col_of(ln, 0),
                              ds[j][2 * h], ds[j][2 * h + 1]);
            }
          }
        }
      });
    });
    accumulate(dv, pa, dt);   // dv += p^T dout
    accumulate(dk, dsa, qt);  // dk += ds^T q
    if constexpr (kAtomicDq) {
      Block::sync();  // every warp's ds is staged (the next step's writes follow walk's barrier)
      add_dq(p, t, q0, static_cast<SmemDq&>(sm).ds, sm.own[0]);
    }
  });
  write(p.dk, t, k0, p.tk, dk, p.scale);
  write(p.dv, t, k0, p.tk, dv, 1.f);
}

template <class Block, int DK, int MT, int KB, int ST>
ZT_FLASH_FN void Tiles<Block, DK, MT, KB, ST>::add_dq(const Params& p, const Task& t, int64_t q0,
                                                      const uint16_t* ds, const uint16_t* k) {
  static_assert(KB * DK % kWarps == 0, "every warp takes as many blocks of dq");
  // Not unrolled: with the blocks' loads scheduled across each other on top of dk and dv,
  // the pass ran at 235-255 registers and spilled (D = 128; D = 64 at 32x32).
  ZT_FLASH_NO_UNROLL
  for (int x = 0; x < KB * DK / kWarps; ++x) {
    auto block_of = [&](int ln) { return x * kWarps + ln / 32; };
    Reg<F4> acc[2];
    Block::each([&](int ln) {
      ZT_FLASH_UNROLL
      for (int h = 0; h < 2; ++h) acc[h][ln] = {{0.f, 0.f, 0.f, 0.f}};
    });
    ZT_FLASH_UNROLL
    for (int kc = 0; kc < kRows / 16; ++kc) {
      Reg<U4> a, b;
      // A = ds^T (queries x keys 16 kc ..): ds is stored keys by queries, so transposed on
      // load; B = k (keys 16 kc .. x head-dim columns), transposed on load as in load_b.
      Block::ldsm(
          a,
          [&](int ln) {
            const int l = ln % 32, mi = l / 8, j = block_of(ln);
            return ds + (16 * kc + 8 * (mi / 2) + l % 8) * kLdS + 16 * (j / DK) + 8 * (mi % 2);
          },
          true);
      Block::ldsm(
          b,
          [&](int ln) {
            const int l = ln % 32, mi = l / 8, j = block_of(ln);
            return k + (16 * kc + 8 * (mi % 2) + l % 8) * kLd + 16 * (j % DK) + 8 * (mi / 2);
          },
          true);
      Block::template mma<0>(acc[0], a, b);
      Block::template mma<1>(acc[1], a, b);
    }
    Block::each([&](int ln) {
      const int j = block_of(ln);
      ZT_FLASH_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int64_t q = q0 + 16 * (j / DK) + ln % 32 / 4 + 8 * (e / 2);
        if (q >= p.tq) continue;
        float* row = p.dq_acc + (t.bh * p.tq + q) * D + 16 * (j % DK) + col_of(ln, e);
        ZT_FLASH_UNROLL
        for (int h = 0; h < 2; ++h) Block::atomic_add(row + 8 * h, acc[h][ln].v[e]);
      }
    });
  }
}

template <class Block, int DK, int MT, int KB, int ST>
ZT_FLASH_FN void Tiles<Block, DK, MT, KB, ST>::backward_prepare(const Params& p, int64_t task) {
  const Task t = task_of(p, task, p.tq, false);
  Block::each([&](int ln) {
    for (int row = ln; row < kRows; row += kLanes) {
      const int64_t q = t.r0 + row;
      if (q >= p.tq) break;
      const uint16_t* dout = p.dout.at(t.b, t.h, q);
      p.delta[t.bh * p.tq + q] = row_delta(p.o.at(t.b, t.h, q), [&](int c, uint16_t(&chunk)[kVec]) {
        Block::copy16(chunk, dout + c);
      });
    }
  });
}

template <class Block, int DK, int MT, int KB, int ST>
ZT_FLASH_FN void Tiles<Block, DK, MT, KB, ST>::backward_dq_finish(const Params& p, int64_t task) {
  const Task t = task_of(p, task, p.tq, false);
  constexpr int kPairs = D / 2;
  Block::each([&](int ln) {
    for (int i = ln; i < kRows * kPairs; i += kLanes) {
      const int row = i / kPairs, c = 2 * (i % kPairs);
      const int64_t q = t.r0 + row;
      if (q >= p.tq) break;  // rows grow with i
      const float* acc = p.dq_acc + (t.bh * p.tq + q) * D + c;
      Block::store2(p.dq.at(t.b, t.h, q) + c, acc[0] * p.scale, acc[1] * p.scale);
    }
  });
}

}  // namespace zt::flash
