// DistributedSampler: every rank derives the same per-epoch permutation from the seed,
// shards are disjoint and (with drop_last) equal-sized, together covering the epoch;
// a new epoch reshuffles, and the same (seed, epoch) always gives the same order.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "data/sampler.h"

namespace zt::data {
namespace {

std::vector<std::vector<int64_t>> shards(int64_t n, int64_t world, uint64_t seed, int64_t epoch,
                                         bool shuffle, bool drop_last) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t r = 0; r < world; ++r) {
    DistributedSampler s(n, r, world, seed, shuffle, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}

TEST(Sampler, PermutationIsAPermutation) {
  for (int64_t n : {1, 2, 7, 100}) {
    auto p = random_permutation(n, 42, 3);
    ASSERT_EQ(static_cast<int64_t>(p.size()), n);
    std::sort(p.begin(), p.end());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(p[i], i);
  }
}

TEST(Sampler, DropLastShardsAreDisjointEqualAndInRange) {
  for (int64_t world : {1, 2, 3, 4}) {
    for (int64_t n : {10, 11, 12, 13}) {
      auto sh = shards(n, world, 7, 0, true, true);
      std::set<int64_t> seen;
      for (const auto& s : sh) {
        EXPECT_EQ(static_cast<int64_t>(s.size()), n / world);
        for (int64_t i : s) {
          EXPECT_GE(i, 0);
          EXPECT_LT(i, n);
          EXPECT_TRUE(seen.insert(i).second) << "index " << i << " on two ranks";
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), (n / world) * world);
    }
  }
}

TEST(Sampler, PaddedShardsCoverEverything) {
  for (int64_t world : {2, 3, 4}) {
    const int64_t n = 10;
    auto sh = shards(n, world, 7, 1, true, false);
    std::set<int64_t> seen;
    for (const auto& s : sh) {
      EXPECT_EQ(static_cast<int64_t>(s.size()), (n + world - 1) / world);
      seen.insert(s.begin(), s.end());
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
  }
}

// Without drop_last the epoch's order is the world-size-free permutation, then its first
// samples again until every rank has as many: the padding is the epoch's head, which
// DataLoader::unpadded counts on.
TEST(Sampler, PaddingRepeatsTheEpochsFirstSamplesAfterTheOneOrder) {
  const int64_t n = 10;
  DistributedSampler one(n, 0, 1, 7, true, false);
  one.set_epoch(2);
  const std::vector<int64_t> order = one.global_order();
  for (int64_t world : {3, 4, 6}) {
    DistributedSampler s(n, 0, world, 7, true, false);
    s.set_epoch(2);
    const std::vector<int64_t> padded = s.global_order();
    ASSERT_EQ(static_cast<int64_t>(padded.size()), s.total_size());
    for (int64_t i = 0; i < s.total_size(); ++i)
      EXPECT_EQ(padded[i], order[i % n]) << "position " << i << " at world " << world;
  }
}

TEST(Sampler, SameSeedAndEpochSameOrderNewEpochReshuffles) {
  auto a = shards(64, 2, 5, 0, true, true);
  auto b = shards(64, 2, 5, 0, true, true);
  auto c = shards(64, 2, 5, 1, true, true);
  auto d = shards(64, 2, 6, 0, true, true);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
}

TEST(Sampler, NoShuffleIsStrided) {
  DistributedSampler s(10, 1, 3, 0, false, true);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{1, 4, 7}));
  s.set_epoch(5);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{1, 4, 7}));
}

TEST(Sampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 2, 2), Error);
  EXPECT_THROW(DistributedSampler(10, -1, 2), Error);
  EXPECT_THROW(DistributedSampler(0, 0, 1), Error);
  EXPECT_THROW(DistributedSampler(3, 0, 4, 0, true, true), Error);
  EXPECT_NO_THROW(DistributedSampler(3, 0, 4, 0, true, false));
}

}  // namespace
}  // namespace zt::data
