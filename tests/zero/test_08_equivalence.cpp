// Lesson 8 — equivalence.
// Invariant: ZeRO-3 changes where state lives, not what is computed. Training the Mixed
// model (Linear, Conv2d, Conv3d, GroupNorm, LayerNorm, attention) for 5 AdamW steps on
// N = 1..4 thread ranks — the global batch split across ranks — gives the parameters of
// plain single-process training on the whole batch, to 1e-5 relative in f32; also with
// gradient accumulation and with gradient clipping active.
#include "zero/lesson_util.h"

using namespace zt;

namespace {
void check_equivalence(int N, const lesson::EquivalenceSetup& s) {
  auto expect = lesson::train_single(s);
  comm::run_threads(
      N, [&](comm::Communicator& comm) { lesson::train_zero_and_compare(comm, s, expect); });
}
}  // namespace

TEST(Lesson08Equivalence, PlainAdamW) {
  for (int N : {1, 2, 3, 4}) check_equivalence(N, {});
}

TEST(Lesson08Equivalence, WithGradientAccumulation) {
  check_equivalence(3, {.gas = 2});
}

TEST(Lesson08Equivalence, WithClipping) {
  check_equivalence(4, {.clip = 0.05});
}
