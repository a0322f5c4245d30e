// cpu::blas_gemm splits a large f32 product into blocks of output rows over the kernel
// threads, each block one single-threaded BLAS call. The split must give one call's bits
// for every transpose, padded leading dimensions, alpha and beta, at the shapes of the
// GPT's and the tokenizer's products, on every OpenBLAS kernel (Intel's and Zen's
// register tiles differ); a product with too few rows for two aligned blocks, and a
// product inside a parallel region, run whole.
#include <cstring>
#include <vector>

#include "common/test_util.h"
#include "core/cpu/blas.h"
#include "core/rng.h"

using namespace zt;

namespace {

struct Case {
  int64_t m, n, k;
};

template <typename T>
std::vector<T> random_values(int64_t count, uint64_t seed) {
  const Generator g(seed);
  std::vector<T> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<T>(g.normal(static_cast<uint64_t>(i)));
  return v;
}

// c = 1.5 op(a) op(b) + 0.5 c with leading dimensions 3 wider than needed, once with the
// calling thread's count (split) and once as one BLAS call; true when the bits agree.
template <typename T>
bool split_equals_one_call(bool ta, bool tb, const Case& s) {
  const int64_t ar = ta ? s.k : s.m, ac = ta ? s.m : s.k;  // a's memory layout
  const int64_t br = tb ? s.n : s.k, bc = tb ? s.k : s.n;
  const int64_t lda = ac + 3, ldb = bc + 3, ldc = s.n + 3;
  const std::vector<T> a = random_values<T>(ar * lda, 1), b = random_values<T>(br * ldb, 2);
  std::vector<T> split = random_values<T>(s.m * ldc, 3), whole = split;
  cpu::blas_gemm(ta, tb, s.m, s.n, s.k, T(1.5), a.data(), lda, b.data(), ldb, T(0.5), split.data(),
                 ldc);
  cpu::detail::blas_call(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                         static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k),
                         T(1.5), a.data(), static_cast<int>(lda), b.data(), static_cast<int>(ldb),
                         T(0.5), whole.data(), static_cast<int>(ldc));
  return std::memcmp(split.data(), whole.data(), split.size() * sizeof(T)) == 0;
}

// Tall and wide, sides not multiples of the row alignment, each product large enough for
// two blocks (a wide one with few rows runs whole); then the shapes of a GPT block's
// products at width 256 over 1024 tokens, forward and backward, and its 4096-word head.
const Case kTall{150, 70, 400}, kWide{40, 301, 400};
const Case kShapes[] = {kTall,
                        {100, 3000, 64},  // wide, with rows enough for two blocks
                        {1024, 768, 256},
                        {1024, 256, 1024},
                        {256, 1024, 1024},
                        {1024, 4096, 256},
                        {4096, 256, 1024},
                        {33, 2000, 129}};

}  // namespace

TEST(BlasSplit, LargeProductsSplitOverTheThreadsOnly) {
  test::ThreadCount two(2);
  EXPECT_EQ(cpu::blas_split_parts(kTall.m, kTall.n, kTall.k), 2);
  EXPECT_EQ(cpu::blas_split_parts(kWide.m, kWide.n, kWide.k), 1);  // 40 rows: one block
  EXPECT_EQ(cpu::blas_split_parts(96, 4096, 4096), 2);
  EXPECT_EQ(cpu::blas_split_parts(16, 16, 16), 1);     // too little work to share
  EXPECT_EQ(cpu::blas_split_parts(8, 8, 1 << 20), 1);  // too few rows for two blocks
  // Rows for one aligned block and part of another: a second block of 47 rows, or of one,
  // would be under the alignment (and the one-row block in OpenBLAS's small-matrix range).
  EXPECT_EQ(cpu::blas_split_parts(95, 4096, 4096), 1);
  EXPECT_EQ(cpu::blas_split_parts(49, 300, 300), 1);
  std::vector<int64_t> inside(2, -1);
  parallel_for(2, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) inside[i] = cpu::blas_split_parts(kTall.m, kTall.n, kTall.k);
  });
  EXPECT_EQ(inside, (std::vector<int64_t>{1, 1}));  // a worker's product runs whole
  test::ThreadCount one(1);
  EXPECT_EQ(cpu::blas_split_parts(kTall.m, kTall.n, kTall.k), 1);
}

TEST(BlasSplit, ASplitProductHasOneCallsBits) {
  test::ThreadCount two(2);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (const Case& s : kShapes) {
        EXPECT_TRUE(split_equals_one_call<float>(ta, tb, s))
            << "ta=" << ta << " tb=" << tb << " m=" << s.m << " n=" << s.n << " k=" << s.k;
      }
    }
  }
  EXPECT_EQ(openblas_get_num_threads(), 1);  // BLAS's own pool stays off
}
