// Lesson 1 — partition math.
// Invariant: a parameter of n elements over N ranks is split into N flat shards of
// ceil(n / N) elements; shard r starts at r * ceil(n / N); the padding (N * ceil(n/N) - n
// zeros) sits at the end, so concatenating the shards in rank order and dropping the
// padding gives back the parameter. Ranks whose offset r x ceil(n/N) is at or past n hold
// only padding, which can happen for N <= n too (n = 5, N = 4: 2 + 2 + 1 + 0). Padding can
// cover more than one rank.
#include <gtest/gtest.h>

#include "core/error.h"
#include "zero/partition.h"

using zt::zero::make_partition;

TEST(Lesson01PartitionMath, EvenSplitHasNoPadding) {
  auto p = make_partition(12, 4);
  EXPECT_EQ(p.shard_numel, 3);
  EXPECT_EQ(p.padding(), 0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(p.shard_offset(r), 3 * r);
    EXPECT_EQ(p.shard_valid(r), 3);
  }
}

TEST(Lesson01PartitionMath, UnevenSplitPadsTheLastRanks) {
  auto p = make_partition(10, 3);  // 4 + 4 + 2 real elements, 2 padding
  EXPECT_EQ(p.shard_numel, 4);
  EXPECT_EQ(p.padded_numel(), 12);
  EXPECT_EQ(p.padding(), 2);
  EXPECT_EQ(p.shard_valid(0), 4);
  EXPECT_EQ(p.shard_valid(1), 4);
  EXPECT_EQ(p.shard_valid(2), 2);
  EXPECT_EQ(p.shard_offset(2), 8);
}

TEST(Lesson01PartitionMath, PaddingCanFillARankWhenRanksAreFewerThanElements) {
  auto p = make_partition(5, 4);  // shards of 2: 2 + 2 + 1 + 0 real elements, 3 padding
  EXPECT_EQ(p.shard_numel, 2);
  EXPECT_EQ(p.shard_valid(2), 1);
  EXPECT_EQ(p.shard_valid(3), 0) << "rank 3's offset (6) is past the end (5)";
  EXPECT_EQ(p.padding(), 3) << "one padding element on rank 2, two on rank 3";
}

TEST(Lesson01PartitionMath, MoreRanksThanElements) {
  auto p = make_partition(3, 4);  // one element each on ranks 0..2, rank 3 all padding
  EXPECT_EQ(p.shard_numel, 1);
  EXPECT_EQ(p.shard_valid(2), 1);
  EXPECT_EQ(p.shard_valid(3), 0);
  EXPECT_EQ(p.padding(), 1);
}

TEST(Lesson01PartitionMath, ShardsCoverEveryElementExactlyOnce) {
  for (int64_t n : {0, 1, 5, 7, 64, 1000, 1001}) {
    for (int N = 1; N <= 5; ++N) {
      auto p = make_partition(n, N);
      int64_t covered = 0;
      for (int r = 0; r < N; ++r) {
        EXPECT_EQ(p.shard_offset(r), covered) << "n=" << n << " N=" << N << " r=" << r;
        covered += p.shard_valid(r);
        if (p.shard_valid(r) < p.shard_numel) {  // only the tail may be short
          for (int q = r + 1; q < N; ++q) EXPECT_EQ(p.shard_valid(q), 0);
          break;
        }
      }
      EXPECT_EQ(covered, n);
      EXPECT_LT(p.padding(), N);
    }
  }
}

TEST(Lesson01PartitionMath, BadArgumentsAreErrors) {
  EXPECT_THROW(make_partition(10, 0), zt::Error);
  EXPECT_THROW(make_partition(-1, 2), zt::Error);
  EXPECT_THROW(make_partition(10, 2).shard_valid(2), zt::Error);
}
