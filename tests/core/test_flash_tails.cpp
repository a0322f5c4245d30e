// The fused attention kernels (core/cuda/flash_tiles.h, run on the CPU by their warp
// emulation) write only the rows they own. A sequence that fills no whole tile leaves the
// last tile's rows past the end to be computed on zero padding and dropped: its outputs
// (out, dq, dk, dv) and its per-row statistics (lse, delta) must end at the last row.
// Each result here is a view into a larger buffer preset to a sentinel: the rows between
// one head's end and the next (where an output row past the end would land, unseen when
// the next head's tile overwrites it) and the elements after the last row of the last
// head must keep it, for every head dim's tile height, causal and not, under both ways
// of finding dq.
#include <string>

#include "common/attention_cases.h"
#include "common/test_util.h"
#include "core/cuda/flash_dispatch.h"

using namespace zt;

namespace {

constexpr int64_t kGap = 8;        // rows (or elements) of sentinel after each view
constexpr double kSentinel = 7.0;  // exact in bf16 and f32

Tensor normals(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, g, DType::f64).to(DType::bf16);
}

// A (n0, n1, t, d) bf16 view whose heads lie kGap sentinel rows apart, and its buffer.
struct Rows {
  Tensor buffer, view;
};
Rows padded_rows(int64_t n0, int64_t n1, int64_t t, int64_t d) {
  Tensor buffer = full({n0, n1, t + kGap, d}, kSentinel, DType::bf16);
  return {buffer, buffer.narrow(2, 0, t)};
}
// True when every sentinel row of r is untouched.
::testing::AssertionResult gaps_untouched(const Rows& r, int64_t t) {
  const Tensor gap = r.buffer.narrow(2, t, kGap).to(DType::f64).contiguous();
  return test::values_are(gap.reshape({-1}),
                          std::vector<double>(static_cast<size_t>(gap.numel()), kSentinel), 0);
}

// A (n0, n1, t) f32 statistic, contiguous as the kernels index it, followed by kGap
// sentinel elements, and its buffer.
struct Stats {
  Tensor buffer, view;
};
Stats padded_stats(int64_t n0, int64_t n1, int64_t t) {
  Tensor buffer = full({n0 * n1 * t + kGap}, kSentinel, DType::f32);
  return {buffer, buffer.narrow(0, 0, n0 * n1 * t).view({n0, n1, t})};
}
::testing::AssertionResult tail_untouched(const Stats& s) {
  return test::values_are(s.buffer.narrow(0, s.view.numel(), kGap),
                          std::vector<double>(kGap, kSentinel), 0);
}

}  // namespace

TEST(FlashAttentionTails, ResultsEndAtTheLastRow) {
  // 150 rows: tiles of 64 (head dims up to 64) or 32 rows (above), the last one partly
  // filled; two heads of two samples, so the row past each head's end is the next head's
  // gap, and past the last head the buffer's tail.
  const int64_t n0 = 2, n1 = 2, t = 150;
  for (int64_t d : {64, 128}) {
    for (bool causal : {false, true}) {
      for (flash::Backward way : {flash::Backward::split, flash::Backward::atomic}) {
        SCOPED_TRACE("D=" + std::to_string(d) + " causal=" + std::to_string(causal) + " " +
                     flash::backward_name(way));
        test::FlashBackwardScope scope(way);
        const Tensor q = normals({n0, n1, t, d}, 1), k = normals({n0, n1, t, d}, 2),
                     v = normals({n0, n1, t, d}, 3), dout = normals({n0, n1, t, d}, 4);
        const double scale = 0.125;
        const Rows out = padded_rows(n0, n1, t, d);
        const Stats lse = padded_stats(n0, n1, t);
        cpu::flash_attention_forward(out.view, lse.view, q, k, v, scale, causal);
        EXPECT_TRUE(gaps_untouched(out, t)) << "out";
        EXPECT_TRUE(tail_untouched(lse)) << "lse";

        const Rows dq = padded_rows(n0, n1, t, d), dk = padded_rows(n0, n1, t, d),
                   dv = padded_rows(n0, n1, t, d);
        const Stats delta = padded_stats(n0, n1, t);
        cpu::flash_attention_backward(dq.view, dk.view, dv.view, delta.view, q, k, v, out.view,
                                      dout, lse.view, scale, causal);
        EXPECT_TRUE(gaps_untouched(dq, t)) << "dq";
        EXPECT_TRUE(gaps_untouched(dk, t)) << "dk";
        EXPECT_TRUE(gaps_untouched(dv, t)) << "dv";
        EXPECT_TRUE(tail_untouched(delta)) << "delta";
      }
    }
  }
}
