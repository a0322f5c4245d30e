// app::sum_in_index_order: item scores gathered from every rank and added up in dataset
// order, so an evaluation's sums have the same bits however its items were spread over
// ranks and batches. The values below are chosen so that the order of the additions shows:
// f64 sums of them in another order (a rank's partial sum, then an all-reduce) round
// differently.
#include <array>
#include <vector>

#include "apps/common/ordered_sums.h"
#include "common/test_util.h"
#include "zero/comm/thread_comm.h"

using namespace zt;

namespace {

// Item i's two values: one of very different magnitudes, and 1.
app::IndexedValues<2> item(int64_t i) {
  static const double kValues[] = {1e16, 1.0, -1e16, 3.0, 0.1, 1e-3, 7e15, 0.3};
  return {i, {kValues[i % 8] * static_cast<double>(i + 1), 1.0}};
}

// The items 0..n-1 dealt round-robin to the ranks, each rank's in reverse order.
std::array<double, 3> sums_on(int ranks, int64_t n) {
  std::array<double, 3> result{};
  comm::run_threads(ranks, [&](comm::Communicator& comm) {
    std::vector<app::IndexedValues<2>> mine;
    for (int64_t i = n - 1; i >= 0; --i)
      if (i % ranks == comm.rank()) mine.push_back(item(i));
    const std::array<double, 3> s = app::sum_in_index_order(mine, comm, "test scores");
    if (comm.rank() == 0) result = s;
  });
  return result;
}

}  // namespace

TEST(OrderedSums, TheSameBitsOnAnyNumberOfRanks) {
  const int64_t n = 37;
  std::array<double, 3> serial{};
  for (int64_t i = 0; i < n; ++i) {
    serial[0] += item(i).values[0];
    serial[1] += item(i).values[1];
    serial[2] += 1;
  }
  // Summed in another order (by rank, as an all-reduce of partial sums adds them), the
  // first value rounds otherwise: the test could tell a wrong order.
  double by_rank = 0;
  for (int r = 0; r < 3; ++r) {
    double part = 0;
    for (int64_t i = r; i < n; i += 3) part += item(i).values[0];
    by_rank += part;
  }
  ASSERT_NE(by_rank, serial[0]);
  for (const int ranks : {1, 2, 3, 4}) {
    const std::array<double, 3> s = sums_on(ranks, n);
    EXPECT_EQ(s[0], serial[0]) << ranks << " ranks";
    EXPECT_EQ(s[1], serial[1]) << ranks << " ranks";
    EXPECT_EQ(s[2], static_cast<double>(n)) << ranks << " ranks";
  }
}

TEST(OrderedSums, ARankWithoutItemsTakesPart) {
  comm::run_threads(3, [&](comm::Communicator& comm) {
    std::vector<app::IndexedValues<1>> mine;
    if (comm.rank() == 1) mine = {{4, {2.5}}, {2, {0.5}}};
    const std::array<double, 2> s = app::sum_in_index_order(mine, comm, "test scores");
    EXPECT_EQ(s[0], 3.0);
    EXPECT_EQ(s[1], 2.0);
  });
}
