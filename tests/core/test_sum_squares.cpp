// sum_squares: the fused sum of squares in double for every floating dtype, against a
// plain double loop (sizes around the kernel's eight lanes, and empty), bit for bit
// against the documented lane order, on strided views, its memory (no copy of a
// contiguous input) and its errors.
#include <cstring>

#include "common/test_util.h"
#include "core/allocator.h"

using namespace zt;

namespace {

const DType kFloating[] = {DType::f32, DType::f64, DType::bf16, DType::f16};
const int64_t kSizes[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 1001, 100003};

// Standard normals drawn in f64, rounded to dt.
Tensor normals(int64_t n, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn({n}, g, DType::f64).to(dt);
}

// The sum of squares of x's values (as doubles), one running sum in index order.
double plain_sum_sq(const Tensor& x) {
  double s = 0.0;
  for (double v : x.to_vector()) s += v * v;
  return s;
}

// The order kernel_list.h documents for the CPU: lane i % 8, the tail into lane 0, the
// lanes added in order at the end.
double lane_sum_sq(const Tensor& x) {
  const std::vector<double> v = x.to_vector();
  const int64_t n = static_cast<int64_t>(v.size());
  double lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lane[k] += v[i + k] * v[i + k];
  for (; i < n; ++i) lane[0] += v[i] * v[i];
  double s = 0.0;
  for (double l : lane) s += l;
  return s;
}

double bits_of(const Tensor& one) {
  return one.contiguous().data<double>()[0];
}

}  // namespace

TEST(SumSquares, OneF64ElementOnTheInputsDeviceWithoutGradient) {
  Tensor x = normals(10, DType::f32, 1);
  x.set_requires_grad(true);
  Tensor s = sum_squares(x);
  EXPECT_EQ(s.sizes(), (Shape{1}));
  EXPECT_EQ(s.dtype(), DType::f64);
  EXPECT_TRUE(s.device().is_cpu());
  EXPECT_FALSE(s.requires_grad());
}

TEST(SumSquares, MatchesAPlainDoubleLoopForEveryFloatingDtype) {
  for (DType dt : kFloating)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      Tensor x = normals(n, dt, 7 + static_cast<uint64_t>(n));
      const double want = plain_sum_sq(x);
      const double got = sum_squares(x).item();
      // Both sums are in double over the same squares, in different orders: they agree
      // to a few double roundings of the total (relative 1e-12 leaves a wide margin).
      EXPECT_NEAR(got, want, 1e-12 * want);
      if (n == 0) {
        EXPECT_EQ(got, 0.0);
      }
    }
}

TEST(SumSquares, SmallIntegersSumExactly) {
  // Integers in [-8, 8] are exact in every dtype and so are their sums of squares: any
  // lost, repeated or misconverted element changes the result.
  for (DType dt : kFloating)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      Generator g(3 + static_cast<uint64_t>(n));
      Tensor x = randint(-8, 9, {n}, g).to(dt);
      EXPECT_EQ(sum_squares(x).item(), plain_sum_sq(x));
    }
}

TEST(SumSquares, FollowsTheDocumentedLaneOrderBitForBit) {
  // The gradient norm of CPU training is this sum: its bits must not move. Every size up
  // to 64 (each tail length many times) and two long ones: a change in the order of the
  // additions changes the last bits of some of these sums.
  std::vector<int64_t> sizes = {1001, 100003};
  for (int64_t n = 0; n <= 64; ++n) sizes.push_back(n);
  for (DType dt : kFloating)
    for (int64_t n : sizes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      Tensor x = normals(n, dt, 11 + static_cast<uint64_t>(n));
      const double got = bits_of(sum_squares(x)), want = lane_sum_sq(x);
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(double)), 0) << got << " vs " << want;
    }
}

TEST(SumSquares, StridedInputsAreMadeContiguousFirst) {
  Tensor x = normals(37 * 11, DType::f32, 5).reshape({37, 11});
  Tensor t = x.transpose(0, 1);  // not contiguous: summed in t's logical order
  ASSERT_FALSE(t.is_contiguous());
  EXPECT_EQ(bits_of(sum_squares(t)), bits_of(sum_squares(t.contiguous())));
  Tensor every_other = normals(200, DType::f64, 6).slice(0, 1, 200, 2);
  EXPECT_EQ(bits_of(sum_squares(every_other)), lane_sum_sq(every_other));
}

TEST(SumSquares, AContiguousInputIsNotCopied) {
  Tensor x = normals(1 << 16, DType::f32, 9);
  sum_squares(x);  // warm
  reset_peak_memory();
  const int64_t before = memory_stats().total_current;
  Tensor s = sum_squares(x);
  // The result's 8 bytes, nothing the size of x (256 KiB).
  EXPECT_LE(memory_stats().total_peak - before, 64);
}

TEST(SumSquares, RejectsNonFloatingAndUndefinedInputs) {
  for (DType dt : {DType::i64, DType::i32, DType::b8})
    EXPECT_TRUE(test::throws_with([&] { sum_squares(zeros({4}, dt)); },
                                  "sum_squares: expects a floating tensor"));
  EXPECT_TRUE(test::throws_with([] { sum_squares(Tensor()); }, "sum_squares: the input tensor"));
}
