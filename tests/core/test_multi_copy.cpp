// multi_copy_ and multi_add_: many contiguous copies (or additions) in one kernel call,
// as the ZeRO engine packs buckets and gathered parameters. Each pair must give the bits
// of its own copy_ or add_ of the converted source, with any number of pairs, sizes
// that straddle the kernel's chunks, empty pairs and mixed dtypes; integers and bools
// copy into their own dtype; bad pairs (a tensor without storage among them) are refused
// with a message that names the pair.
#include "common/test_util.h"
#include "core/kernels.h"
#include "core/parallel.h"
#include "core/work_counts.h"

using namespace zt;
using zt::test::all_close;
using zt::test::throws_with;

namespace {

// Standard normals (drawn in f64), rounded to dt.
Tensor normal(int64_t n, uint64_t seed, DType dt) {
  Generator g(seed);
  return randn({n}, g, DType::f64).to(dt);
}

// Pair sizes: empty, tiny, and ones that cross the CPU kernel's 32K-element chunks.
const std::vector<int64_t> kSizes = {0, 1, 7, 32768, 40000, 3, 70001, 129};

struct Pairs {
  std::vector<Tensor> dst, src;
};

// One source of each size in `from`, and destinations in `to` filled with other values.
Pairs make_pairs(DType to, DType from, uint64_t seed) {
  Pairs p;
  for (int64_t n : kSizes) {
    p.src.push_back(normal(n, seed++, from));
    p.dst.push_back(normal(n, seed++, to));
  }
  return p;
}

std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.clone());
  return out;
}

}  // namespace

TEST(MultiCopy, EachPairEqualsItsOwnCopyOrAdd) {
  const DType types[] = {DType::f32, DType::f64, DType::bf16, DType::f16};
  for (DType to : types)
    for (DType from : types) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      Pairs p = make_pairs(to, from, 100);
      std::vector<Tensor> copied = clones(p.dst), added = clones(p.dst);
      multi_copy_(copied, p.src);
      multi_add_(added, p.src);
      for (size_t i = 0; i < p.src.size(); ++i) {
        Tensor want_copy = p.dst[i].clone();
        want_copy.copy_(p.src[i]);
        Tensor want_add = p.dst[i].clone();
        add_(want_add, p.src[i].to(to));
        EXPECT_TRUE(all_close(copied[i], want_copy, 0, 0)) << "pair " << i;
        EXPECT_TRUE(all_close(added[i], want_add, 0, 0)) << "pair " << i;
      }
    }
}

TEST(MultiCopy, EachPairEqualsItsOwnAddOnSeveralThreads) {
  // The pairs laid end to end are cut into chunks of 32K elements, one per thread: a chunk
  // that starts inside a pair adds only that pair's elements from the chunk's start on, so
  // every element is added once.
  test::ThreadCount threads(3);
  Pairs p = make_pairs(DType::f32, DType::f32, 400);
  std::vector<Tensor> added = clones(p.dst), copied = clones(p.dst);
  multi_add_(added, p.src);
  multi_copy_(copied, p.src);
  for (size_t i = 0; i < p.src.size(); ++i) {
    Tensor want = p.dst[i].clone();
    add_(want, p.src[i]);
    EXPECT_TRUE(all_close(added[i], want, 0, 0)) << "pair " << i;
    EXPECT_TRUE(all_close(copied[i], p.src[i], 0, 0)) << "pair " << i;
  }
}

TEST(MultiCopy, OneKernelCallPerDtypeGroup) {
  Pairs p = make_pairs(DType::f32, DType::bf16, 200);
  Pairs q = make_pairs(DType::f32, DType::f32, 300);
  WorkCounts before = work_counts();
  multi_copy_(p.dst, p.src);
  EXPECT_EQ((work_counts() - before).dispatches, 1) << kSizes.size() << " pairs of one group";

  // Interleaved groups: one call each, and every pair still lands in its own place.
  std::vector<Tensor> dst, src, want;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    dst.push_back(p.dst[i].clone());
    src.push_back(p.src[i]);
    want.push_back(p.src[i].to(DType::f32));
    dst.push_back(q.dst[i].clone());
    src.push_back(q.src[i]);
    want.push_back(q.src[i]);
  }
  before = work_counts();
  multi_copy_(dst, src);
  EXPECT_EQ((work_counts() - before).dispatches, 2) << "two dtype groups";
  for (size_t i = 0; i < dst.size(); ++i) EXPECT_TRUE(all_close(dst[i], want[i], 0, 0)) << i;

  before = work_counts();
  multi_copy_({}, {});
  EXPECT_EQ((work_counts() - before).dispatches, 0) << "nothing to copy";
}

TEST(MultiCopy, ViewsOfOneBufferCopyIntoTheirOwnSpans) {
  // The engine's use: slices of one flat buffer <- slices of another, in shuffled order.
  Tensor flat = arange(0, 20).to(DType::f32);
  Tensor out = full({20}, -1.0);
  multi_copy_({out.narrow(0, 12, 8), out.narrow(0, 0, 5), out.narrow(0, 5, 7)},
              {flat.narrow(0, 0, 8), flat.narrow(0, 8, 5), flat.narrow(0, 13, 7)});
  EXPECT_TRUE(test::values_are(
      out, {8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0, 1, 2, 3, 4, 5, 6, 7}));
  multi_add_({out.narrow(0, 0, 2)}, {flat.narrow(0, 18, 2)});
  EXPECT_TRUE(test::values_are(out.narrow(0, 0, 2), {26, 28}));
}

TEST(MultiCopy, NonFloatingTensorsCopyIntoTheirOwnDtype) {
  for (DType dt : {DType::i64, DType::i32, DType::b8}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = from_vector({1, 0, 7}, {3}, dt), b = from_vector({0, 5}, {2}, dt);
    Tensor x = zeros({3}, dt), y = zeros({2}, dt);
    multi_copy_({x, y}, {a, b});
    EXPECT_TRUE(all_close(x, a, 0, 0));
    EXPECT_TRUE(all_close(y, b, 0, 0));
  }
}

TEST(MultiCopy, BadPairsAreRefusedByName) {
  Tensor a = zeros({4}), b = zeros({4});
  EXPECT_TRUE(throws_with([&] { multi_copy_({a, b}, {a}); }, "2 destinations for 1 sources"));
  EXPECT_TRUE(throws_with(
      [&] {
        multi_copy_({a, b}, {a, zeros({5})});
      },
      "pair 1 is f32[4] cpu <- f32[5] cpu"));
  EXPECT_TRUE(throws_with(
      [&] {
        multi_copy_({zeros({2, 3}).transpose(0, 1)}, {zeros({3, 2})});
      },
      "pass contiguous pairs of one numel"));
  EXPECT_TRUE(throws_with([&] { multi_add_({a}, {Tensor()}); },
                          "multi_add_: pair 0 has an undefined tensor"));
  // The op groups pairs by dtype; the kernel takes one group.
  EXPECT_TRUE(throws_with(
      [&] {
        cpu::multi_copy({a, zeros({4}, DType::f64)}, {a, a}, false);
      },
      "every destination of one dtype"));
  EXPECT_TRUE(throws_with([&] { multi_copy_({zeros({4}, DType::i64)}, {a}); },
                          "copies f32 into i64; a non-floating dtype is copied only into itself"));
  EXPECT_TRUE(
      throws_with([&] { multi_copy_({a}, {zeros({4}, DType::i32)}); }, "copies i32 into f32"));
  Tensor n = zeros({4}, DType::i64);
  EXPECT_TRUE(throws_with([&] { multi_add_({n}, {n}); }, "additions take floating dtypes"));
}

// Pairs are copied in parallel chunks, in no set order: a pair whose destination another
// pair writes or reads (a shift within one buffer) would give a result that depends on
// that order. Refused before anything is written, naming both pairs; disjoint spans of one
// buffer, one source read by several pairs, and a pair onto itself are fine.
TEST(MultiCopy, PairsThatOverlapOneAnotherAreRefused) {
  const Tensor buf = arange(0, 8);
  const Tensor lo = buf.narrow(0, 0, 4), hi = buf.narrow(0, 4, 4), mid = buf.narrow(0, 2, 4);
  EXPECT_TRUE(throws_with(
      [&] {
        multi_copy_({hi, lo}, {lo, ones({4})});
      },
      "multi_copy_: pair 1's destination overlaps pair 0's source"));
  EXPECT_TRUE(throws_with(
      [&] {
        multi_add_({lo, ones({2})}, {ones({4}), mid.narrow(0, 0, 2)});
      },
      "multi_add_: pair 0's destination overlaps pair 1's source"));
  EXPECT_TRUE(throws_with(
      [&] {
        multi_add_({lo, mid}, {ones({4}), ones({4})});
      },
      "multi_add_: pair 0's destination overlaps pair 1's destination"));
  EXPECT_TRUE(test::values_are(buf, {0, 1, 2, 3, 4, 5, 6, 7}));
  const Tensor nine = full({4}, 9.0), other = zeros({4});
  multi_copy_({lo, hi, other}, {lo, nine, nine});
  EXPECT_TRUE(test::values_are(buf, {0, 1, 2, 3, 9, 9, 9, 9}));
  EXPECT_TRUE(test::values_are(other, {9, 9, 9, 9}));
}

// A partitioned parameter that is not gathered has no storage: the pair is refused by name
// before the kernel runs, with one kernel thread or several (where the copy would be split
// across a parallel region).
TEST(MultiCopy, ATensorWithoutStorageIsRefusedByName) {
  const int before = num_threads();
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    Tensor released = zeros({70001});
    released.set_name("block.3.weight");
    released.impl()->storage = nullptr;  // as ZeroParam::release leaves it
    Tensor a = zeros({40000}), b = ones({40000}), c = zeros({70001});
    EXPECT_TRUE(throws_with(
        [&] {
          multi_copy_({a, c}, {b, released});
        },
        "multi_copy: pair 1's source ('block.3.weight', f32[70001] cpu) has "
        "no storage: a partitioned parameter that is not gathered"))
        << threads << " threads";
    EXPECT_TRUE(throws_with(
        [&] {
          multi_add_({a, released}, {b, c});
        },
        "pair 1's destination ('block.3.weight'"))
        << threads << " threads";
    EXPECT_EQ(a.to_vector(), std::vector<double>(40000, 0.0)) << "nothing is written";
  }
  set_num_threads(before);
}
