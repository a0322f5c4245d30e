// The CUDA kernels' division by a fixed divisor (core/cuda/int_divider.h): a multiply-high,
// an add and a shift in place of a 64-bit division, checked here against `/` and `%` on
// the host, which runs the same arithmetic. Every divisor up to 4096 and divisors near
// powers of two and near 2^31, against numerators at and around multiples, at the top of
// the range (2^31 - 1) and drawn at random.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "common/test_util.h"
#include "core/cuda/int_divider.h"

using zt::cuda::IntDivider;

namespace {

constexpr uint32_t kTop = (uint32_t{1} << 31) - 1;  // the largest numerator (and divisor)

// The first numerator n where div or divmod disagrees with `/`, or kTop + 1 if none.
uint64_t first_wrong(const IntDivider& d, const std::vector<uint32_t>& ns) {
  for (uint32_t n : ns) {
    uint32_t q = 0, r = 0;
    d.divmod(n, q, r);
    if (d.div(n) != n / d.divisor || q != n / d.divisor || r != n % d.divisor) return n;
  }
  return uint64_t{kTop} + 1;
}

std::vector<uint32_t> numerators(uint32_t d, std::mt19937& rng) {
  std::vector<uint32_t> ns = {0, 1, 2, kTop, kTop - 1, kTop - d + 1};
  for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{kTop / d}}) {
    for (int64_t delta : {-1, 0, 1}) {
      const int64_t n = static_cast<int64_t>(k * d) + delta;
      if (n >= 0 && n <= kTop) ns.push_back(static_cast<uint32_t>(n));
    }
  }
  std::uniform_int_distribution<uint32_t> any(0, kTop);
  for (int i = 0; i < 64; ++i) ns.push_back(any(rng));
  return ns;
}

}  // namespace

TEST(IntDivider, AgreesWithDivisionForEveryDivisorTried) {
  std::mt19937 rng(17);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int p = 12; p <= 31; ++p) {
    for (int64_t delta : {-1, 0, 1}) {
      const int64_t d = (int64_t{1} << p) + delta;
      if (d >= 1 && d <= kTop) divisors.push_back(static_cast<uint32_t>(d));
    }
  }
  std::uniform_int_distribution<uint32_t> any(1, kTop);
  for (int i = 0; i < 2000; ++i) divisors.push_back(any(rng));
  for (uint32_t d : divisors) {
    const IntDivider div(d);
    ASSERT_EQ(first_wrong(div, numerators(d, rng)), uint64_t{kTop} + 1) << "divisor " << d;
  }
}

TEST(IntDivider, EveryNumeratorBelow2To20ForAFewDivisors) {
  for (uint32_t d : {1u, 3u, 7u, 10u, 1000u, 1023u, 1025u, 65537u}) {
    const IntDivider div(d);
    for (uint32_t n = 0; n < (1u << 20); ++n) ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
  }
}

TEST(IntDivider, RefusesADivisorOutsideItsRange) {
  EXPECT_TRUE(zt::test::throws_with([] { IntDivider d(0); }, "IntDivider: divisor 0 outside"));
  EXPECT_TRUE(zt::test::throws_with([] { IntDivider d(int64_t{1} << 31); },
                                    "IntDivider: divisor 2147483648 outside [1, 2^31)"));
}
