// The CPU side of the device kernel table (core/kernels.h), called directly: the
// contracts the CUDA twins share (index_range's empty answer, cross_entropy_forward's
// first bad position, random_fill's float rounding, argmax's NaN rule), thread
// independence, the accumulation types, and ops that run on the table for every dtype
// it accepts.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "core/rng.h"

using namespace zt;
using zt::test::values_are;

// One accumulation trait for CPU and CUDA code: integers and masks add as integers.
static_assert(std::is_same_v<acc_t<float>, float> && std::is_same_v<acc_t<double>, double>);
static_assert(std::is_same_v<acc_t<bf16>, float> && std::is_same_v<acc_t<f16>, float>);
static_assert(std::is_same_v<acc_t<int32_t>, int64_t> && std::is_same_v<acc_t<bool>, int>);

TEST(KernelTable, IndexRangeAndRowsOfAnyDtype) {
  EXPECT_EQ(cpu::index_range(Tensor::empty({0}, DType::i64)), (std::array<int64_t, 2>{0, -1}));
  Tensor idx = from_vector({3, -1, 7, 0}, {4}, DType::i32);
  EXPECT_EQ(cpu::index_range(idx), (std::array<int64_t, 2>{-1, 7}));
  // index_rows copies rows of any dtype: x (outer 2, n 3, inner 1) i64, rows 2, 0.
  Tensor x = from_vector({10, 11, 12, 20, 21, 22}, {2, 3, 1}, DType::i64);
  Tensor out = Tensor::empty({2, 2, 1}, DType::i64);
  cpu::index_rows(out, x, from_vector({2, 0}, {2}, DType::i64), 2, 3, 1);
  EXPECT_TRUE(values_are(out, {12, 10, 22, 20}));
  // The op accepts integer and bool inputs too (their gradients are never needed).
  Tensor mask = from_vector({1, 0, 1}, {3}, DType::b8);
  Tensor picked = index_select(mask, 0, from_vector({1, 2, 1}, {3}, DType::i64));
  EXPECT_EQ(picked.dtype(), DType::b8);
  EXPECT_TRUE(values_are(picked, {0, 1, 0}));
  EXPECT_TRUE(
      test::throws_with([&] { index_select(x.reshape({6}), 0, from_vector({6}, {1}, DType::i64)); },
                        "index 6 out of range [0, 6)"));
}

TEST(KernelTable, CrossEntropySkipsIgnoredAndReportsFirstBadTarget) {
  // logits (5, 2); targets: kept 1, ignored, bad 2 (= C), bad -3, kept 0.
  Tensor logits =
      from_vector({0.5, -1.0, 2.0, 0.25, 1.0, 1.0, -0.5, 3.0, 1.5, -2.0}, {5, 2}, DType::f32);
  Tensor target = from_vector({1, -100, 2, -3, 0}, {5}, DType::i64);
  auto lse_of = [](double a, double b) { return std::log(std::exp(a) + std::exp(b)); };
  const double lse0 = lse_of(0.5, -1.0), lse4 = lse_of(1.5, -2.0);
  Tensor lse = Tensor::empty({5}, DType::f64);
  Tensor stats = Tensor::empty({3}, DType::f64);
  cpu::cross_entropy_forward(stats, lse, logits, target, -100);
  const double* s = stats.data<double>();
  EXPECT_NEAR(s[0], (lse0 + 1.0) + (lse4 - 1.5), 1e-6);
  EXPECT_EQ(s[1], 2.0);
  EXPECT_EQ(s[2], 2.0);  // position 2 is the first out of [0, 2)
  EXPECT_TRUE(values_are(lse, {lse0, 0, 0, 0, lse4}, 1e-6));  // 0 on rows not kept
  // The backward of those rows: (softmax - onehot(t)) * grad / count on the two kept rows;
  // a bad target's row (which the forward reported) is zero, as an ignored one, and not
  // exp(logits) over the 0 the forward left for its log-sum-exp (the GPU's kernel zeroes it
  // too, CudaDeviceErrors.ABadTargetsRowGetsAZeroGradient); nothing is written past a row.
  Tensor d5 = Tensor::empty({5, 2}, DType::f32);
  cpu::cross_entropy_backward(d5, logits, lse, target, full({}, 3.0, DType::f64), stats, -100);
  const double q0 = std::exp(1.5 - lse4), q1 = std::exp(-2.0 - lse4);
  EXPECT_TRUE(values_are(d5,
                         {1.5 * std::exp(0.5 - lse0), 1.5 * (std::exp(-1.0 - lse0) - 1), 0, 0, 0, 0,
                          0, 0, 1.5 * (q0 - 1), 1.5 * q1},
                         1e-6));
  Tensor good = from_vector({1, -100}, {2}, DType::i32);
  Tensor lse2 = Tensor::empty({2}, DType::f64);
  Tensor stats2 = Tensor::empty({3}, DType::f64);
  cpu::cross_entropy_forward(stats2, lse2, logits.narrow(0, 0, 2), good, -100);
  EXPECT_EQ(stats2.data<double>()[2], -1.0);
  // Gradient in the logits' dtype: (softmax - onehot(t)) * grad / count on kept rows,
  // zero on ignored ones.
  Tensor d = Tensor::empty({2, 2}, DType::f32);
  cpu::cross_entropy_backward(d, logits.narrow(0, 0, 2), lse2, good, full({}, 3.0, DType::f64),
                              stats2, -100);
  const double p0 = std::exp(0.5 - lse0), p1 = std::exp(-1.0 - lse0);
  // One kept row (stats2's count): grad / count = 3.
  EXPECT_TRUE(values_are(d, {3 * p0, 3 * (p1 - 1), 0, 0}, 1e-6));
  // The results do not depend on the thread count, bit for bit (rows over several chunks).
  Generator g(3);
  Tensor big = randn({64, 3000}, g, DType::bf16);
  Tensor tb = randint(0, 3000, {64}, g);
  Tensor la = Tensor::empty({64}, DType::f64), lb = Tensor::empty({64}, DType::f64);
  Tensor da = Tensor::empty({64, 3000}, DType::bf16), db = Tensor::empty({64, 3000}, DType::bf16);
  Tensor one = full({}, 1.0, DType::f64);
  Tensor sa = Tensor::empty({3}, DType::f64), sb = Tensor::empty({3}, DType::f64);
  {
    test::ThreadCount two(2);  // two threads even where the default is one
    cpu::cross_entropy_forward(sa, la, big, tb, -100);
    cpu::cross_entropy_backward(da, big, la, tb, one, sa, -100);
  }
  {
    test::ThreadCount serial(1);
    cpu::cross_entropy_forward(sb, lb, big, tb, -100);
    cpu::cross_entropy_backward(db, big, lb, tb, one, sb, -100);
  }
  EXPECT_EQ(std::memcmp(sa.data_ptr(), sb.data_ptr(), 3 * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(la.data_ptr(), lb.data_ptr(), 64 * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(da.data_ptr(), db.data_ptr(), 64 * 3000 * sizeof(bf16)), 0);
}

TEST(KernelTable, RandomFillRoundsThroughFloatAndIgnoresThreads) {
  const uint64_t seed = 7, offset = 1000;
  const int64_t n = 5000;  // several parallel chunks
  const Generator g(seed);
  Tensor f = Tensor::empty({n}, DType::f32), h = Tensor::empty({n}, DType::bf16);
  Tensor d = Tensor::empty({n}, DType::f64);
  {
    test::ThreadCount two(2);  // two threads even where the default is one
    cpu::random_fill(f, seed, offset, true, 0.5, 2.0);
    cpu::random_fill(h, seed, offset, true, 0.5, 2.0);
    cpu::random_fill(d, seed, offset, false, -1.0, 3.0);
  }
  for (int64_t i = 0; i < n; i += 499) {
    const double z = g.normal(offset + i);
    EXPECT_EQ(f.data<float>()[i], static_cast<float>(0.5 + 2.0 * z)) << i;
    EXPECT_EQ(h.data<bf16>()[i].bits, bf16(f.data<float>()[i]).bits) << i;
    EXPECT_EQ(d.data<double>()[i], -1.0 + 4.0 * g.uniform64(offset + i)) << i;
  }
  Tensor serial = Tensor::empty({n}, DType::f32);
  {
    test::ThreadCount one_thread(1);
    cpu::random_fill(serial, seed, offset, true, 0.5, 2.0);
  }
  EXPECT_EQ(std::memcmp(serial.data_ptr(), f.data_ptr(), n * sizeof(float)), 0);
}

TEST(KernelTable, ArgExtremeTakesTheFirstNaNElseTheFirstExtreme) {
  // PyTorch's rule: a NaN is both the max and the min (the first NaN, wherever it is);
  // without one, ties keep the first.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector({nan, 5, 9, 1, nan, 3, 4, 4, 2}, {3, 3}, DType::f32);
  Tensor out = Tensor::empty({3}, DType::i64);
  cpu::arg_extreme(out, x, 3, 3, true);
  EXPECT_TRUE(values_are(out, {0, 1, 0}));
  cpu::arg_extreme(out, x, 3, 3, false);
  EXPECT_TRUE(values_are(out, {0, 1, 2}));
  // Rows longer than the kernel's blocks of 16: ties and the extremes spread over several
  // blocks and the tail (row 0); NaNs in a later block than a max or min (row 1).
  std::vector<double> v(2 * 40);
  for (int64_t i = 0; i < 40; ++i) v[i] = v[40 + i] = static_cast<double>(i % 7);
  v[23] = v[31] = v[40 + 3] = 9;   // first max at 23
  v[17] = v[38] = v[40 + 4] = -1;  // first min at 17
  for (int64_t i : {20, 33}) v[40 + i] = nan;
  Tensor long_rows = from_vector(v, {2, 40}, DType::bf16);
  Tensor out2 = Tensor::empty({2}, DType::i64);
  cpu::arg_extreme(out2, long_rows, 2, 40, true);
  EXPECT_TRUE(values_are(out2, {23, 20}));
  cpu::arg_extreme(out2, long_rows, 2, 40, false);
  EXPECT_TRUE(values_are(out2, {17, 20}));
}

TEST(KernelTable, ArgExtremeFindsAnExtremeAtEveryPositionOfALongRow) {
  // One row of 40 per position p holding the only max (9) and, elsewhere, the only min
  // (-9): every position of the kernel's blocks of 16 (first, inner, last) and the tail
  // must be found.
  const int64_t n = 40;
  std::vector<double> v(n * n), want_max(n), want_min(n);
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t i = 0; i < n; ++i) v[p * n + i] = static_cast<double>(i % 5);
    const int64_t q = (p + n / 2) % n;
    v[p * n + p] = 9;
    v[p * n + q] = -9;
    want_max[p] = static_cast<double>(p);
    want_min[p] = static_cast<double>(q);
  }
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = from_vector(v, {n, n}, dt), out = Tensor::empty({n}, DType::i64);
    cpu::arg_extreme(out, x, n, n, true);
    EXPECT_TRUE(values_are(out, want_max)) << dtype_name(dt) << " max";
    cpu::arg_extreme(out, x, n, n, false);
    EXPECT_TRUE(values_are(out, want_min)) << dtype_name(dt) << " min";
  }
}

// A contiguous f32 softmax row (softmax, log_softmax, attention's scaled and causal
// softmax, cross-entropy's log-sum-exp) runs through SIMD lanes: an exp of at most about
// 1 ulp and a max and double sum in independent lanes. At every row length around the
// lane widths (tails of 1 to 15 elements) it matches the f64 kernels within a few f32
// ulp, and its edge rows give what the f64 kernels give: a NaN poisons its row, an all
// -inf row is NaN (0 / 0), a single +inf is NaN (inf - inf) and -inf entries weigh 0.
TEST(KernelTable, F32SoftmaxRowsMatchF64AtEveryLength) {
  Generator g(31);
  for (int64_t L : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 4099}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    const int64_t R = 3;
    const Tensor x64 = randn({R, L}, g, DType::f64) * 4.0;
    const Tensor x = x64.to(DType::f32), xr = x.to(DType::f64);  // the f32 values, exactly
    for (bool log : {false, true}) {
      Tensor y = Tensor::empty({R, L}), want = Tensor::empty({R, L}, DType::f64);
      cpu::softmax_forward(y, x, R, L, 1, log);
      cpu::softmax_forward(want, xr, R, L, 1, log);
      EXPECT_CLOSE(y.to(DType::f64), want, 1e-6, log ? 1e-5 : 1e-12);
    }
    if (L <= 100) {  // causal: row r of each L keeps r % L + 1 keys, every length up to L
      Tensor scores = Tensor::empty({L * 2, L}), want = Tensor::empty({L * 2, L}, DType::f64);
      const Tensor s32 = randn({L * 2, L}, g);
      cpu::attention_softmax_forward(scores, s32, L * 2, L, 0.125, true);
      cpu::attention_softmax_forward(want, s32.to(DType::f64), L * 2, L, 0.125, true);
      EXPECT_CLOSE(scores.to(DType::f64), want, 1e-6, 1e-12);
    }
    Tensor target = from_vector(std::vector<double>(R, 0.0), {R}, DType::i64);
    Tensor lse = Tensor::empty({R}, DType::f64), lse64 = Tensor::empty({R}, DType::f64);
    Tensor stats = Tensor::empty({3}, DType::f64);
    cpu::cross_entropy_forward(stats, lse, x, target, -100);
    cpu::cross_entropy_forward(stats, lse64, xr, target, -100);
    EXPECT_CLOSE(lse, lse64, 1e-6, 1e-6);
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const std::vector<std::vector<float>> edges = {
      {1, nan, 2, 3, 4, 5, 6, 7, 8, 9}, {-inf, -inf, -inf}, {0, inf, 1}, {-inf, 0, -inf, 1, -inf}};
  for (const auto& row : edges) {
    const auto L = static_cast<int64_t>(row.size());
    Tensor x = Tensor::empty({1, L});
    std::memcpy(x.data<float>(), row.data(), row.size() * sizeof(float));
    Tensor y = Tensor::empty({1, L}), want = Tensor::empty({1, L}, DType::f64);
    cpu::softmax_forward(y, x, 1, L, 1, false);
    cpu::softmax_forward(want, x.to(DType::f64), 1, L, 1, false);
    for (int64_t l = 0; l < L; ++l) {
      const double a = y.data<float>()[l], b = want.data<double>()[l];
      EXPECT_TRUE(std::isnan(a) ? std::isnan(b) : std::abs(a - b) <= 1e-6)
          << "element " << l << " of a row of " << L << ": " << a << " against " << b;
    }
  }
}
