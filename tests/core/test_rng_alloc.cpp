// The counter-based RNG (reproducible, position-addressed streams) and the allocators'
// byte accounting per MemTag and per thread ledger; bf16/f16 conversions.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "common/test_util.h"

using namespace zt;
using zt::test::values_are;

TEST(Rng, SameSeedSameNumbers) {
  Generator a(42), b(42), c(43);
  std::vector<double> va = randn({100}, a).to_vector(), vb = randn({100}, b).to_vector();
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, randn({100}, c).to_vector());
  manual_seed(5);
  std::vector<double> d1 = rand({10}).to_vector();
  manual_seed(5);
  EXPECT_EQ(d1, rand({10}).to_vector());
}

TEST(Rng, ElementDependsOnlyOnPosition) {
  // Drawing 10 then 10 equals drawing 20: element i uses stream position offset + i.
  Generator a(9), b(9);
  std::vector<double> first = rand({10}, a).to_vector();
  std::vector<double> second = rand({10}, a).to_vector();
  std::vector<double> all = rand({20}, b).to_vector();
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, all);
  EXPECT_EQ(a.offset(), 20u);
  // Same for normals and for a shaped draw (positions follow row-major order).
  Generator c(9), d(9);
  std::vector<double> n2 = randn({2, 3}, c).to_vector();
  std::vector<double> n1 = randn({6}, d).to_vector();
  EXPECT_EQ(n1, n2);
  // set_state jumps straight to a position.
  Generator e(9);
  e.set_state(9, 10);
  EXPECT_EQ(rand({10}, e).to_vector(), second);
  // The generator's own accessor agrees with the tensor fill.
  EXPECT_EQ(static_cast<double>(Generator(9).uniform(3)), all[3]);
}

TEST(Rng, ANonContiguousTensorIsFilledInRowMajorOrder) {
  // A strided view (a transpose, a column) is filled through a contiguous copy that is
  // then written back: its element i (row-major over the view) is the draw's element i.
  Tensor base = zeros({3, 4});
  const Tensor t = base.transpose(0, 1);  // (4, 3), not contiguous
  Generator a(11), b(11);
  uniform_(t, -1.0, 1.0, a);
  Tensor want = empty({4, 3});
  uniform_(want, -1.0, 1.0, b);
  EXPECT_EQ(t.to_vector(), want.to_vector());
  EXPECT_EQ(a.offset(), 12u);
  const Tensor column = base.narrow(1, 2, 1);  // (3, 1) with a row stride of 4
  normal_(column, 5.0, 2.0, a);
  Tensor want_column = empty({3, 1});
  normal_(want_column, 5.0, 2.0, b);
  EXPECT_EQ(column.to_vector(), want_column.to_vector());
}

TEST(Rng, Distributions) {
  Generator g(1);
  Tensor n = randn({20000}, g, DType::f64);
  EXPECT_NEAR(mean(n).item(), 0.0, 0.03);
  EXPECT_NEAR(std::sqrt(var(n).item()), 1.0, 0.03);
  Tensor u = rand({20000}, g);
  EXPECT_NEAR(mean(u).item(), 0.5, 0.01);
  EXPECT_GE(min(u).item(), 0.0);
  EXPECT_LT(max(u).item(), 1.0);
  Tensor t = empty({20000});
  normal_(t, 3.0, 2.0, g);
  EXPECT_NEAR(mean(t).item(), 3.0, 0.06);
  EXPECT_NEAR(std::sqrt(var(t).item()), 2.0, 0.06);
  uniform_(t, -1.0, 1.0, g);
  EXPECT_GE(min(t).item(), -1.0);
  EXPECT_LT(max(t).item(), 1.0);
  Tensor r = randint(3, 7, {1000}, g);
  EXPECT_EQ(r.dtype(), DType::i64);
  EXPECT_EQ(min(r.to(DType::f32)).item(), 3.0);
  EXPECT_EQ(max(r.to(DType::f32)).item(), 6.0);
}

// The range's width and each draw are counted unsigned: [INT64_MIN, INT64_MAX) is 2^64 - 1
// values wide, past what int64 holds (a signed overflow, which the sanitizer build reports).
TEST(Rng, RandintSpansTheWholeInt64Range) {
  Generator g(5);
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const Tensor r = randint(kMin, kMax, {1000}, g);
  const int64_t* p = r.data<int64_t>();
  EXPECT_LT(*std::min_element(p, p + 1000), kMin / 2);
  EXPECT_GT(*std::max_element(p, p + 1000), kMax / 2);
  const Tensor top = randint(kMax - 2, kMax, {100}, g);
  const int64_t* q = top.data<int64_t>();
  EXPECT_EQ(*std::min_element(q, q + 100), kMax - 2);
  EXPECT_EQ(*std::max_element(q, q + 100), kMax - 1);
}

// A draw lo + (hi - lo) u, u < 1, can still round up to hi in the tensor's dtype: in bf16
// every u within half an ulp of 1 (1 in 512 draws) does, in f32 lo = 1, hi = 2 does for the
// largest u. [lo, hi) is kept: such draws are the dtype's largest value below hi.
TEST(Rng, DrawsThatRoundUpToTheUpperBoundStayBelowIt) {
  Generator g(1);
  for (DType dt : {DType::bf16, DType::f16}) {
    const Tensor u = rand({100000}, g, dt);
    EXPECT_LT(max(u).item(), 1.0) << dtype_name(dt);
    EXPECT_NEAR(mean(u.to(DType::f64)).item(), 0.5, 0.01) << dtype_name(dt);
  }
  const Tensor t = empty({100000});
  uniform_(t, 1.0, 2.0, g);
  EXPECT_LT(max(t).item(), 2.0);
  EXPECT_GE(min(t).item(), 1.0);
  const Tensor h = empty({100000}, DType::bf16);
  uniform_(h, -0.3, 0.3, g);  // bf16(0.3) is 0.30078125, above hi
  EXPECT_LT(max(h).item(), 0.3);
  EXPECT_GE(min(h).item(), -0.30078125);
}

TEST(Rng, BoundsThatDescribeNoDistributionAreRefusedAndDrawNothing) {
  // As PyTorch's uniform_ and normal_: [lo, hi) needs lo <= hi, both finite (inf - -inf
  // would fill NaN), and a standard deviation is >= 0; NaN is none of these. The tensor
  // and the generator's position stay as they were.
  Generator g(1);
  const Tensor t = zeros({4});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  EXPECT_TRUE(test::throws_with([&] { uniform_(t, 1.0, 0.0, g); }, "uniform_: lo (1)"));
  EXPECT_TRUE(test::throws_with([&] { uniform_(t, -inf, inf, g); }, "uniform_"));
  EXPECT_TRUE(test::throws_with([&] { uniform_(t, nan, 1.0, g); }, "uniform_"));
  EXPECT_TRUE(test::throws_with([&] { normal_(t, 0.0, -1.0, g); }, "normal_: std"));
  EXPECT_TRUE(test::throws_with([&] { normal_(t, 0.0, nan, g); }, "normal_: std"));
  EXPECT_TRUE(test::throws_with([&] { normal_(t, inf, 1.0, g); }, "normal_: mean"));
  EXPECT_TRUE(values_are(t, {0, 0, 0, 0}));
  EXPECT_EQ(g.offset(), 0u);
  uniform_(t, 2.0, 2.0, g);  // an empty range of one value, and a point mass, are fine
  normal_(t, 2.0, 0.0, g);
  EXPECT_TRUE(values_are(t, {2, 2, 2, 2}));
}

TEST(Alloc, BytesPerTag) {
  auto ledger = std::make_shared<MemoryLedger>();
  LedgerScope scope(ledger);
  EXPECT_EQ(memory_stats().total_current, 0);
  {
    MemTagScope tag(MemTag::kActivation);
    EXPECT_EQ(current_mem_tag(), MemTag::kActivation);
    Tensor a = empty({100});  // 400 bytes
    {
      MemTagScope inner(MemTag::kParamShard);
      Tensor p = empty({10}, DType::f64);  // 80 bytes
      MemoryCounters c = memory_stats();
      EXPECT_EQ(c.cur(MemTag::kActivation), 400);
      EXPECT_EQ(c.cur(MemTag::kParamShard), 80);
      EXPECT_EQ(c.total_current, 480);
    }
    EXPECT_EQ(current_mem_tag(), MemTag::kActivation);
    MemoryCounters c = memory_stats();
    EXPECT_EQ(c.cur(MemTag::kParamShard), 0);
    EXPECT_EQ(c.pk(MemTag::kParamShard), 80);
    EXPECT_EQ(c.total_peak, 480);
    // A view allocates nothing.
    Tensor v = a.narrow(0, 0, 10);
    EXPECT_EQ(memory_stats().total_current, 400);
  }
  EXPECT_EQ(current_mem_tag(), MemTag::kOther);
  MemoryCounters c = memory_stats();
  EXPECT_EQ(c.total_current, 0);
  EXPECT_EQ(c.total_peak, 480);
  EXPECT_NE(ledger->report_json(Device::cpu()).find("\"param_shard_peak\":80"), std::string::npos);
}

TEST(Alloc, PeakReset) {
  auto ledger = std::make_shared<MemoryLedger>();
  LedgerScope scope(ledger);
  Tensor keep = empty({25});      // 100 bytes
  { Tensor tmp = empty({250}); }  // 1000 bytes, freed
  EXPECT_EQ(memory_stats().total_peak, 1100);
  reset_peak_memory();
  EXPECT_EQ(memory_stats().total_peak, 100);
  EXPECT_EQ(memory_stats().pk(MemTag::kOther), 100);
}

TEST(Alloc, ALimitBelowTheFirstAllocationSaysNothingIsHeld) {
  auto ledger = std::make_shared<MemoryLedger>("rank 0");
  ledger->set_limit(Device::cpu(), 64);
  LedgerScope scope(ledger);
  std::string msg;
  try {
    empty({100});
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("with 0 B in use would pass its limit of 64 B. Largest consumers: none, "
                     "nothing is held (peak 0 B)"),
            std::string::npos)
      << msg;
}

TEST(Alloc, PerThreadLedgers) {
  // Each thread charges the ledger it installed; a tensor is uncharged from the ledger
  // that paid for it, even when freed elsewhere.
  auto l1 = std::make_shared<MemoryLedger>(), l2 = std::make_shared<MemoryLedger>();
  Tensor from_t1;
  std::thread t1([&] {
    LedgerScope s(l1);
    from_t1 = empty({64});  // 256 bytes
  });
  std::thread t2([&] {
    LedgerScope s(l2);
    Tensor x = empty({16}, DType::f64);  // 128 bytes
    EXPECT_EQ(memory_stats().total_current, 128);
  });
  t1.join();
  t2.join();
  EXPECT_EQ(l1->counters(Device::cpu()).total_current, 256);
  EXPECT_EQ(l2->counters(Device::cpu()).total_current, 0);
  EXPECT_EQ(l2->counters(Device::cpu()).total_peak, 128);
  from_t1 = Tensor();
  EXPECT_EQ(l1->counters(Device::cpu()).total_current, 0);
}

// Memory is overcommitted: an allocation larger than the machine succeeds and the process
// is killed when its pages are touched, minutes later. A CPU request that would take the
// process past the machine's memory (RAM and swap, or a container's limit) is refused at
// once, saying what was asked and what is in use; nothing is allocated.
TEST(Alloc, MoreThanTheMachineHasIsRefusedAtOnce) {
  auto ledger = std::make_shared<MemoryLedger>("rank 3");
  LedgerScope scope(ledger);
  const int64_t terabytes = int64_t{1} << 40;  // 4 TiB of f32: more than any test machine
  EXPECT_TRUE(test::throws_with([&] { (void)empty({terabytes}); },
                                "rank 3 is out of memory on cpu: allocating 4096.00 GiB (other)"));
  EXPECT_TRUE(test::throws_with([&] { (void)empty({terabytes}); }, "this machine's memory of"));
  EXPECT_EQ(memory_stats().total_current, 0) << "nothing charged";
  Tensor fine = empty({1024});  // and the process's count was given back
  EXPECT_EQ(memory_stats().total_current, 4096);
}

TEST(Dtype, HalfConversions) {
  // Values exactly representable in both bf16 and f16 survive a round trip.
  std::vector<double> exact = {0, 1, -2, 0.5, 3.75, -0.125, 1024};
  Tensor x = from_vector(exact, {7});
  EXPECT_TRUE(values_are(x.to(DType::bf16).to(DType::f32), exact, 0));
  EXPECT_TRUE(values_are(x.to(DType::f16).to(DType::f32), exact, 0));
  // Others round to nearest: 1 + 2^-9 is below bf16's resolution at 1 (2^-7) -> 1,
  // but representable in f16 (resolution 2^-10).
  Tensor y = from_vector({1.0 + 1.0 / 512}, {1});
  EXPECT_TRUE(values_are(y.to(DType::bf16).to(DType::f32), {1.0}, 0));
  EXPECT_TRUE(values_are(y.to(DType::f16).to(DType::f32), {1.0 + 1.0 / 512}, 0));
  // Relative error of a round trip is bounded by half an ulp: 2^-8 (bf16, 8 significant bits),
  // 2^-11 (f16, 11).
  Generator g(2);
  Tensor r = randn({1000}, g);
  std::vector<double> rv = r.to_vector(), b = r.to(DType::bf16).to_vector(),
                      h = r.to(DType::f16).to_vector();
  for (size_t i = 0; i < rv.size(); ++i) {
    EXPECT_LE(std::abs(b[i] - rv[i]), std::abs(rv[i]) * (1.0 / 256) + 1e-30);
    EXPECT_LE(std::abs(h[i] - rv[i]), std::abs(rv[i]) * (1.0 / 2048) + 1e-7);
  }
  // f16 overflow -> inf; sizes per dtype.
  EXPECT_TRUE(std::isinf(from_vector({70000}, {1}).to(DType::f16).item()));
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(empty({3}, DType::bf16).storage()->bytes(), 6u);
}

namespace {

// A float's bits, the 16-bit pattern it must round to, and why.
struct RoundingCase {
  uint32_t in;
  uint16_t out;
  const char* what;
};

// Each case through the constructor of Half (bf16 or f16) and through a tensor's
// conversion to `dtype`, which go through a double first.
template <typename Half>
void expect_rounding(DType dtype, const std::vector<RoundingCase>& cases) {
  for (const RoundingCase& c : cases) {
    float f;
    std::memcpy(&f, &c.in, 4);
    EXPECT_EQ(Half(f).bits, c.out) << c.what;
    Tensor t = from_vector({static_cast<double>(f)}, {1}).to(dtype);
    if (c.in != 0x7f800001u) {  // (a signalling NaN turns quiet on its way through a double)
      EXPECT_EQ(t.data<Half>()[0].bits, c.out) << c.what << " (tensor)";
    }
  }
}

}  // namespace

// fp32 -> bf16 rounds to nearest, ties to even, on the bits: the constructor every CPU
// write of a bf16 (a master's rounded copy included) goes through. bf16 keeps 7 fraction
// bits, so at 1 its ulp is 2^-7 and 1 + 2^-8 is halfway.
TEST(Dtype, Bf16RoundsTiesToEven) {
  expect_rounding<bf16>(DType::bf16,
                        {{0x3f808000u, 0x3f80, "1 + 2^-8: halfway, to the even 1"},
                         {0x3f818000u, 0x3f82, "1 + 3 x 2^-8: halfway, to the even 1 + 2^-6"},
                         {0x3f808001u, 0x3f81, "just past halfway: up"},
                         {0x3f807fffu, 0x3f80, "just short of halfway: down"},
                         {0xbf808000u, 0xbf80, "-(1 + 2^-8): ties to even in magnitude"},
                         {0x00008000u, 0x0000, "subnormal halfway to 0: 0"},
                         {0x00018000u, 0x0002, "subnormal halfway, odd below: up"},
                         {0x7f7f8000u, 0x7f80, "halfway past the largest bf16: inf"},
                         {0x7f7fffffu, 0x7f80, "FLT_MAX: inf"},
                         {0x7f7f7fffu, 0x7f7f, "just short: the largest bf16"},
                         {0x7f800000u, 0x7f80, "inf stays inf"},
                         {0x7f800001u, 0x7fc0, "a signalling NaN: quiet"}});
}

// fp32 -> f16 rounds to nearest, ties to even, in the normal and the subnormal range
// alike: f16 keeps 10 fraction bits, so at 1 its ulp is 2^-10 and 1 + 2^-11 is halfway;
// its smallest subnormal is 2^-24.
TEST(Dtype, F16RoundsTiesToEven) {
  expect_rounding<f16>(DType::f16,
                       {{0x3f801000u, 0x3c00, "1 + 2^-11: halfway, to the even 1"},
                        {0x3f803000u, 0x3c02, "1 + 3 x 2^-11: halfway, to the even 1 + 2^-9"},
                        {0x3f801001u, 0x3c01, "just past halfway: up"},
                        {0x3f800fffu, 0x3c00, "just short of halfway: down"},
                        {0xbf801000u, 0xbc00, "-(1 + 2^-11): ties to even in magnitude"},
                        {0x33000000u, 0x0000, "2^-25, halfway to the smallest subnormal: 0"},
                        {0x33c00000u, 0x0002, "3 x 2^-25: halfway, odd below: up"},
                        {0x477ff000u, 0x7c00, "65520, halfway past the largest f16: inf"}});
}
