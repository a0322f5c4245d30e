// GroupNorm's epilogue (core/ops/norm.h): silu(n) and n * scale + shift computed in the
// norm's kernels must equal the ops they replace (group_norm, then addcmul and silu), in
// value and in every gradient, and cost one dispatch each way.
#include "common/test_util.h"
#include "core/work_counts.h"

using namespace zt;

namespace {

struct Inputs {
  Tensor x, w, b, scale, shift, gy;
};

// x (3, 8, 5, 7) around 2 (so silu sees both signs after the affine), in dtype dt.
Inputs make_inputs(DType dt, uint64_t seed) {
  Generator g(seed);
  auto leaf = [&](const Shape& s) {
    return randn(s, g, DType::f64).to(dt).set_requires_grad(true);
  };
  Inputs in{leaf({3, 8, 5, 7}), leaf({8}),          leaf({8}),
            leaf({3, 8, 5, 7}), leaf({3, 8, 5, 7}), randn({3, 8, 5, 7}, g, DType::f64).to(dt)};
  in.x = add(in.x.detach(), 2.0).set_requires_grad(true);
  return in;
}

// The output and the gradients of every input, fused (epilogue) or composed.
std::vector<Tensor> run(const Inputs& in, bool modulated, bool silu_after, bool fused) {
  std::vector<Tensor> leaves = {in.x, in.w, in.b};
  if (modulated) leaves.insert(leaves.end(), {in.scale, in.shift});
  for (const Tensor& t : leaves) t.set_grad(Tensor());
  Tensor y;
  if (fused) {
    const GroupNormEpilogue e{modulated ? in.scale : Tensor(), modulated ? in.shift : Tensor(),
                              silu_after};
    y = group_norm(in.x, 4, in.w, in.b, 1e-6, e);
  } else {
    y = group_norm(in.x, 4, in.w, in.b, 1e-6);
    if (modulated) y = addcmul(in.shift, y, in.scale);
    if (silu_after) y = silu(y);
  }
  y.backward(in.gy);
  std::vector<Tensor> out = {y.detach()};
  for (const Tensor& t : leaves) out.push_back(t.grad());
  return out;
}

void expect_fused_matches_composed(DType dt, double tol) {
  const Inputs in = make_inputs(dt, 21);
  for (bool modulated : {false, true}) {
    for (bool silu_after : {false, true}) {
      if (!modulated && !silu_after) continue;  // no epilogue
      SCOPED_TRACE(std::string(dtype_name(dt)) + (modulated ? " modulated" : "") +
                   (silu_after ? " silu" : ""));
      const std::vector<Tensor> fused = run(in, modulated, silu_after, true);
      const std::vector<Tensor> composed = run(in, modulated, silu_after, false);
      for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_TRUE(fused[i].defined()) << "output " << i;
        EXPECT_CLOSE(fused[i], composed[i], tol, tol) << "output " << i;
      }
    }
  }
}

}  // namespace

TEST(GroupNormEpilogue, F64MatchesTheComposedOps) {
  expect_fused_matches_composed(DType::f64, 1e-12);
}

// The f32 kernels: the silu row loops of the elementwise ops, rows of 35 (vector tails).
TEST(GroupNormEpilogue, F32MatchesTheComposedOps) {
  expect_fused_matches_composed(DType::f32, 2e-5);
}

// The f32 kernel runs the epilogue in one pass per row (cpu/norm_epilogue.h) with the
// bits of separate ops: n as group_norm alone rounds it, n * scale and + shift rounded
// each (no FMA), the silu op's lanes, and in the backward the silu op's gradient.
// Rows of 35, 48 and 17 elements: whole vectors and a tail on every ISA, 17 leaving a
// tail of one element (16 + 1, 2 * 8 + 1, 4 * 4 + 1).
TEST(GroupNormEpilogue, F32BitsAreTheSeparateOps) {
  for (const Shape& s : {Shape{3, 8, 5, 7}, Shape{2, 4, 6, 8}, Shape{2, 4, 1, 17}}) {
    Generator g(31);
    const Tensor x = add(randn(s, g), 2.0), w = randn({s[1]}, g), b = randn({s[1]}, g);
    const Tensor gy = randn(s, g);
    auto leaf = [&] { return randn(s, g).set_requires_grad(true); };
    const Tensor scale = leaf(), shift = leaf();
    const Tensor y = group_norm(x, 2, w, b, 1e-6, {scale, shift, true});
    y.backward(gy);
    const Tensor fused_dscale = scale.grad(), fused_dshift = shift.grad();
    scale.set_grad(Tensor());
    shift.set_grad(Tensor());
    const Tensor ops = silu(add(mul(group_norm(x, 2, w, b, 1e-6), scale), shift));
    ops.backward(gy);
    EXPECT_CLOSE(y, ops, 0, 0) << "y";
    EXPECT_CLOSE(fused_dscale, scale.grad(), 0, 0) << "dscale";
    EXPECT_CLOSE(fused_dshift, shift.grad(), 0, 0) << "dshift";
    // The other two epilogues: silu alone, the modulation alone (forward bits).
    EXPECT_CLOSE(group_norm(x, 2, w, b, 1e-6, {Tensor(), Tensor(), true}),
                 silu(group_norm(x, 2, w, b, 1e-6)), 0, 0)
        << "silu";
    EXPECT_CLOSE(group_norm(x, 2, w, b, 1e-6, {scale, shift, false}),
                 add(mul(group_norm(x, 2, w, b, 1e-6), scale), shift), 0, 0)
        << "modulation";
  }
}

TEST(GroupNormEpilogue, GradientsByFiniteDifferences) {
  Tensor x = test::rand_leaf({2, 4, 3}, 1), w = test::rand_leaf({4}, 2);
  Tensor b = test::rand_leaf({4}, 3), s = test::rand_leaf({2, 4, 3}, 4);
  Tensor t = test::rand_leaf({2, 4, 3}, 5);
  EXPECT_GRAD_OK(
      [](const std::vector<Tensor>& in) {
        return group_norm(in[0], 2, in[1], in[2], 1e-5, {in[3], in[4], true});
      },
      {x, w, b, s, t});
  // No affine parameters; a transposed (non-contiguous) input and scale.
  Tensor xt = test::rand_leaf({2, 3, 4}, 6), st = test::rand_leaf({2, 3, 4}, 7);
  EXPECT_GRAD_OK(
      [&](const std::vector<Tensor>& in) {
        return group_norm(in[0].transpose(1, 2), 2, Tensor(), Tensor(), 1e-5,
                          {in[1].transpose(1, 2), in[2], false});
      },
      {xt, st, test::rand_leaf({2, 4, 3}, 8)});
}

// Only the scale and shift want gradients: the kernel still needs the gradient of n
// (dx's buffer), and x, weight and bias get none.
TEST(GroupNormEpilogue, OnlyTheModulationWantsGradients) {
  const Inputs in = make_inputs(DType::f64, 5);
  Tensor x = in.x.detach(), w = in.w.detach(), b = in.b.detach();
  auto modulation_grads = [&](bool fused) {
    Tensor s = in.scale.detach().set_requires_grad(true);
    Tensor t = in.shift.detach().set_requires_grad(true);
    Tensor y = fused ? group_norm(x, 4, w, b, 1e-6, {s, t, true})
                     : silu(addcmul(t, group_norm(x, 4, w, b, 1e-6), s));
    y.backward(in.gy);
    return std::vector<Tensor>{s.grad(), t.grad()};
  };
  const std::vector<Tensor> fused = modulation_grads(true), composed = modulation_grads(false);
  EXPECT_CLOSE(fused[0], composed[0], 1e-12, 1e-12);
  EXPECT_CLOSE(fused[1], composed[1], 1e-12, 1e-12);
}

// 16-bit inputs: n, the modulation and the SiLU in f32, rounded once at the end, where the
// composed bf16 ops round after each of them.
TEST(GroupNormEpilogue, Bf16RoundsOnceAtTheEnd) {
  const Inputs in = make_inputs(DType::f32, 9);
  auto bf = [](const Tensor& t) { return t.detach().to(DType::bf16); };
  const Tensor x = bf(in.x), w = bf(in.w), b = bf(in.b), s = bf(in.scale), t = bf(in.shift);
  const Tensor y = group_norm(x, 4, w, b, 1e-6, {s, t, true});
  auto f32 = [](const Tensor& u) { return u.to(DType::f32); };
  const Tensor once = silu(addcmul(f32(t), group_norm(f32(x), 4, f32(w), f32(b), 1e-6), f32(s)));
  EXPECT_EQ(y.to_vector(), once.to(DType::bf16).to_vector()) << "the f32 result rounded once";
  const Tensor stepwise = silu(addcmul(t, group_norm(x, 4, w, b, 1e-6), s));
  EXPECT_NE(y.to_vector(), stepwise.to_vector()) << "these inputs tell one rounding from three";
}

// Without an epilogue the backward does not read the bias, so it is not saved: a write
// to it between forward and backward (an optimizer step) is no error.
TEST(GroupNormEpilogue, WithoutOneTheBiasIsNotSaved) {
  const Inputs in = make_inputs(DType::f64, 17);
  Tensor y = group_norm(in.x, 4, in.w, in.b, 1e-6);
  {
    autograd::NoGradGuard ng;
    in.b.fill_(1.0);
  }
  y.backward(in.gy);
  EXPECT_TRUE(in.x.grad().defined());
  // With one, it is saved: the same write is refused.
  Tensor z = group_norm(in.x, 4, in.w, in.b, 1e-6, {Tensor(), Tensor(), true});
  {
    autograd::NoGradGuard ng;
    in.b.fill_(2.0);
  }
  EXPECT_TRUE(test::throws_with([&] { z.backward(in.gy); }, "written in place"));
}

TEST(GroupNormEpilogue, OneDispatchEachWay) {
  Inputs in = make_inputs(DType::f32, 13);
  WorkCounts before = work_counts();
  Tensor y = group_norm(in.x, 4, in.w, in.b, 1e-6, {in.scale, in.shift, true});
  EXPECT_EQ((work_counts() - before).dispatches, 1);
  Tensor gy = in.gy;  // contiguous already: the backward adds no copy
  before = work_counts();
  autograd::backward({y}, {gy});
  EXPECT_EQ((work_counts() - before).dispatches, 1)
      << "dx, dweight, dbias, dscale and dshift in one kernel call";
}

TEST(GroupNormEpilogue, BadModulationIsNamed) {
  Tensor x = zeros({2, 4, 3});
  EXPECT_TRUE(test::throws_with(
      [&] {
        group_norm(x, 2, Tensor(), Tensor(), 1e-5, {ones({2, 4, 3}), Tensor(), false});
      },
      "pass both the epilogue's scale and shift"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        group_norm(x, 2, Tensor(), Tensor(), 1e-5, {ones({2, 4, 1}), zeros({2, 4, 3}), false});
      },
      "the epilogue's scale must have the input's shape [2, 4, 3], got [2, 4, 1]"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        group_norm(x, 2, Tensor(), Tensor(), 1e-5,
                   {ones({2, 4, 3}, DType::f64), zeros({2, 4, 3}), false});
      },
      "group_norm: dtype mismatch"));
}
