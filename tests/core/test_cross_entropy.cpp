// cross_entropy over large vocabularies and in every layout and dtype it accepts, against
// a reference computed here in double from the same (rounded) logits: per row the
// log-sum-exp with the max taken out, the loss lse - x[t] averaged over the kept rows,
// and the gradient (exp(x - lse) - onehot(t)) * g / count, zero on ignored rows.
// Tolerances: f32 and f64 logits (the kernels sum exponentials in double): rtol 1e-5 on
// the loss and 1e-4 on the gradient (f32 exp of x - lse near -11 keeps about 6
// digits); bf16 and f16 logits: the loss comes out in f32 and the gradient in the 16-bit
// dtype, so one rounding, rtol 1e-2 (bf16 has 8 bits of mantissa: 2^-8 = 0.4%).
#include <cmath>
#include <limits>
#include <vector>

#include "common/test_util.h"

using namespace zt;

namespace {

struct Reference {
  double loss = 0;
  std::vector<double> grad;  // in the logits' layout (N, C, S)
};

// logits viewed as (N, C, S) (S = 1 for (N, C)); target (N * S) in row order (n, s).
Reference reference(const Tensor& logits, const std::vector<double>& target, int64_t ignore,
                    double g) {
  const int64_t N = logits.size(0), C = logits.size(1), S = logits.numel() / (N * C);
  const std::vector<double> x = logits.to(DType::f64).contiguous().to_vector();
  Reference r;
  r.grad.assign(x.size(), 0.0);
  std::vector<double> lse(N * S, 0.0);
  double total = 0, count = 0;
  auto at = [&](int64_t n, int64_t c, int64_t s) { return (n * C + c) * S + s; };
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t s = 0; s < S; ++s) {
      const auto t = static_cast<int64_t>(target[n * S + s]);
      if (t == ignore) continue;
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, x[at(n, c, s)]);
      for (int64_t c = 0; c < C; ++c) sum += std::exp(x[at(n, c, s)] - mx);
      lse[n * S + s] = mx + std::log(sum);
      total += lse[n * S + s] - x[at(n, t, s)];
      count += 1;
    }
  }
  r.loss = total / count;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t s = 0; s < S; ++s) {
      const auto t = static_cast<int64_t>(target[n * S + s]);
      if (t == ignore) continue;
      for (int64_t c = 0; c < C; ++c)
        r.grad[at(n, c, s)] =
            (std::exp(x[at(n, c, s)] - lse[n * S + s]) - (c == t ? 1.0 : 0.0)) * g / count;
    }
  }
  return r;
}

// Targets in [0, C) with every `ignore_every`-th one set to `ignore`.
std::vector<double> targets(int64_t n, int64_t C, uint64_t seed, int64_t ignore_every,
                            int64_t ignore) {
  Generator g(seed);
  std::vector<double> t = randint(0, C, {n}, g).to_vector();
  for (int64_t i = 0; i < n; i += ignore_every) t[i] = static_cast<double>(ignore);
  return t;
}

// Runs cross_entropy forward and backward (upstream gradient g) and checks both against
// the reference at relative tolerances rtol_loss and rtol_grad (the gradient's absolute
// tolerance is relative to its largest entry).
void check(const Tensor& logits_in, const std::vector<double>& t, const Shape& target_shape,
           DType index_type, int64_t ignore, double g, double rtol_loss, double rtol_grad) {
  Tensor logits = logits_in.detach();
  logits.set_requires_grad(true);
  Tensor target = from_vector(t, target_shape, index_type);
  Tensor loss = cross_entropy(logits, target, ignore);
  EXPECT_EQ(loss.dtype(), is_16bit_float(logits.dtype()) ? DType::f32 : logits.dtype());
  loss.backward(full({}, g, loss.dtype()));
  const Reference r = reference(logits, t, ignore, g);
  EXPECT_NEAR(loss.item(), r.loss, rtol_loss * std::abs(r.loss));
  ASSERT_TRUE(logits.grad().defined());
  EXPECT_EQ(logits.grad().dtype(), logits.dtype());
  EXPECT_EQ(logits.grad().sizes(), logits.sizes());
  double gmax = 0;
  for (double v : r.grad) gmax = std::max(gmax, std::abs(v));
  EXPECT_TRUE(test::all_close(logits.grad().to(DType::f64),
                              from_vector(r.grad, logits.sizes(), DType::f64), rtol_grad,
                              rtol_grad * gmax * 1e-2));
}

}  // namespace

TEST(CrossEntropyLarge, VocabOf50kF32WithIgnoredRows) {
  // GPT-2-sized vocabulary, 128 positions, every 7th ignored, logits of scale 3.
  const int64_t P = 128, C = 50000;
  Generator g(11);
  Tensor logits = mul(randn({P, C}, g, DType::f32), 3.0);
  check(logits, targets(P, C, 12, 7, -100), {P}, DType::i64, -100, 1.0, 1e-5, 1e-4);
}

TEST(CrossEntropyLarge, VocabOf50kBf16WithI32Targets) {
  const int64_t P = 96, C = 50000;
  Generator g(13);
  Tensor logits = mul(randn({P, C}, g, DType::f32), 2.0).to(DType::bf16);
  // An ignore_index inside [0, C) ignores that class's rows; upstream gradient 0.5.
  check(logits, targets(P, C, 14, 5, 7), {P}, DType::i32, 7, 0.5, 1e-2, 1e-2);
}

TEST(CrossEntropyLarge, ClassDimInsideEveryDtype) {
  // (N, C, H, W): the class dim is not last; the op copies it last in the logits' dtype
  // and returns the gradient in the logits' layout.
  const Shape shape{3, 700, 4, 5};
  const double tols[] = {1e-5, 1e-10, 1e-2, 1e-2};
  const DType dtypes[] = {DType::f32, DType::f64, DType::bf16, DType::f16};
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(dtype_name(dtypes[i]));
    Generator g(20 + i);
    Tensor logits = mul(randn(shape, g, DType::f64), 2.0).to(dtypes[i]);
    const double rtol_grad = dtypes[i] == DType::f32 ? 1e-4 : tols[i];
    check(logits, targets(3 * 4 * 5, 700, 30 + i, 6, -100), {3, 4, 5}, DType::i64, -100, 1.0,
          tols[i], rtol_grad);
  }
}

TEST(CrossEntropyLarge, NonContiguousLogitsAndEdgeCases) {
  // A transposed (N, C) view is read through one contiguous copy; the gradient keeps
  // the view's shape.
  Generator g(40);
  Tensor base = randn({300, 16}, g, DType::f64);
  check(base.transpose(0, 1), targets(16, 300, 41, 4, -100), {16}, DType::i64, -100, 2.0, 1e-10,
        1e-10);
  // Every target ignored: NaN loss, zero gradient.
  Tensor logits = randn({4, 1000}, g, DType::f32).set_requires_grad(true);
  Tensor loss = cross_entropy(logits, full({4}, -100, DType::i64));
  EXPECT_TRUE(std::isnan(loss.item()));
  loss.backward();
  EXPECT_EQ(max(abs(logits.grad())).item(), 0.0);
  // An out-of-range target names its value and position.
  Tensor bad = from_vector({1, 2, 1000, 3}, {4}, DType::i32);
  EXPECT_TRUE(test::throws_with([&] { cross_entropy(logits, bad); },
                                "target 1000 at position 2 is out of range [0, 1000)"));
  // -inf logits (masked classes) are fine when the target's logit is finite.
  std::vector<double> v(2 * 5, -INFINITY);
  v[0] = 1.0, v[1] = 2.0, v[7] = 0.5;
  Tensor masked = from_vector(v, {2, 5}, DType::f32);
  const double expect =
      ((std::log(std::exp(1.0) + std::exp(2.0)) - 1.0) + 0.0) / 2;  // row 1: only class 2
  EXPECT_NEAR(cross_entropy(masked, from_vector({0, 2}, {2}, DType::i64)).item(), expect, 1e-6);
}
