// app::sum_in_index_order: item scores gathered from every rank and added up in dataset
// order, so an evaluation's sums have the same bits however its items were spread over
// ranks and batches. The values below are chosen so that the order of the additions shows:
// f64 sums of them in another order (a rank's partial sum, then an all-reduce) round
// differently. A vqgpt evaluation built on it scores each eval item once, whatever padding
// evens out the ranks.
#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/app_test_util.h"
#include "apps/common/ordered_sums.h"
#include "apps/vqgpt_test_util.h"
#include "common/test_util.h"
#include "data/factory.h"
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

// 3 eval items on 2 ranks of batch 2: rank 1 pads its batch with item 0, which must not
// count. Trained at lr 0, both runs evaluate the same weights.
TEST(OrderedSums, AVqgptEvaluationScoresEachItemOnceOnAnyNumberOfRanks) {
  std::vector<double> losses;
  for (const int ranks : {1, 2}) {
    const std::string dir = apptest::fresh_dir("zt_ordered_sums", std::to_string(ranks));
    std::filesystem::create_directories(dir);
    const config::AppConfig cfg =
        vqgpt_test::tiny_config(dir, "",
                                {"train.steps=1", "train.lr=0", "train.batch=2",
                                 "train.eval_every=1", "data.eval_samples=3"});
    losses.push_back(
        apptest::train_vqgpt_with_fresh_tokenizer(cfg, dir + "/tokenizer.safetensors", ranks)[0]
            .eval_loss);
    std::filesystem::remove_all(dir);
  }
  EXPECT_GT(losses[0], 0.0);
  EXPECT_NEAR(losses[1], losses[0], 1e-6 * losses[0]);
}

// An evaluation pass of `batches` reads that many when the split holds more, and the whole
// split when it holds fewer or none is asked for.
TEST(OrderedSums, AnEvaluationPassReadsTheBatchesItIsAskedFor) {
  const config::AppConfig cfg = apptest::tiny_vqtok_config(apptest::fresh_dir("ordered", "pass"));
  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto loader = data::make_loader(data::make_dataset(cfg.data), cfg.data, 2, 0, 1);
    const int64_t all = loader->batches_per_epoch();
    ASSERT_GT(all, 2);
    EXPECT_EQ(app::begin_eval_pass(*loader, 2, comm, "t"), 2);
    EXPECT_EQ(app::begin_eval_pass(*loader, 0, comm, "t"), all);
    EXPECT_EQ(app::begin_eval_pass(*loader, all + 5, comm, "t"), all);
  });
}
