// A user's dataset sharded over 1 to 3 thread ranks (comm::run_threads), each rank with its
// own loader from make_loader, read with 1 or 3 workers: in every epoch the ranks together
// read the first ranks x batch x batches_per_epoch items of the epoch's one shuffled order,
// each once; the same seed gives the same stream, a new epoch another order; an evaluation
// loader reads every item (the padding that evens out the ranks left out by unpadded()). A
// state saved mid-epoch resumes the same batches; under another world the saved position
// is converted with state_at_sample. A sample that fails on one rank ends the run, named.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "data/factory.h"
#include "data/loader.h"
#include "zero/comm/thread_comm.h"

namespace zt::data {
namespace {

// Item i is a (1, 3, 1, 1) clip of the value i.
class Items : public Dataset {
 public:
  explicit Items(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Sample get(int64_t i) const override {
    return Sample{full({1, 3, 1, 1}, static_cast<double>(i)), i, i};
  }
  std::string describe() const override { return "Items(" + std::to_string(n_) + ")"; }

 private:
  int64_t n_;
};

std::vector<int64_t> ids(const Batch& b) {
  std::vector<int64_t> v;
  for (double x : b.indices.to_vector()) v.push_back(static_cast<int64_t>(x));
  return v;
}

// What each rank of `world` thread ranks reads in `epochs` epochs: stream[rank][epoch], the
// items in the order read, counting unpadded items only. The clips are checked against the
// indices.
using Streams = std::vector<std::vector<std::vector<int64_t>>>;
Streams read_on_ranks(int world, int64_t n, int64_t batch, int64_t workers, bool eval,
                      int64_t epochs, int64_t seed = 5) {
  auto ds = std::make_shared<Items>(n);
  DataConfig cfg;
  cfg.seed = seed;
  cfg.workers = workers;
  Streams out(static_cast<size_t>(world));
  std::mutex mu;
  comm::run_threads(world, [&](comm::Communicator& c) {
    auto l = make_loader(ds, cfg, batch, c.rank(), c.size(), eval);
    std::vector<std::vector<int64_t>> mine(static_cast<size_t>(epochs));
    for (int64_t b = 0; b < epochs * l->batches_per_epoch(); ++b) {
      const Batch x = l->next();
      const auto v = ids(x);
      const auto clips = x.clips.to_vector();
      for (size_t k = 0; k < v.size(); ++k) EXPECT_EQ(clips[3 * k], static_cast<double>(v[k]));
      auto& e = mine[static_cast<size_t>(x.epoch)];
      e.insert(e.end(), v.begin(), v.begin() + l->unpadded(x));
    }
    std::lock_guard<std::mutex> lock(mu);
    out[static_cast<size_t>(c.rank())] = mine;
  });
  return out;
}

// The epoch's order of all n items (DistributedSampler of one rank).
std::vector<int64_t> global_order(int64_t n, int64_t epoch, int64_t seed = 5) {
  DistributedSampler s(n, 0, 1, static_cast<uint64_t>(seed));
  s.set_epoch(epoch);
  return s.global_order();
}

TEST(LoaderRanks, TrainingShardsAreTheEpochsOrderDealtRoundRobin) {
  const int64_t n = 23, batch = 2;
  for (int world = 1; world <= 3; ++world) {
    for (int64_t workers : {1, 3}) {
      SCOPED_TRACE(testing::Message() << world << " ranks, workers " << workers);
      const Streams s = read_on_ranks(world, n, batch, workers, /*eval=*/false, 3);
      const int64_t per_rank = (n / world) / batch * batch;
      for (int64_t e = 0; e < 3; ++e) {
        const auto order = global_order(n, e);
        std::vector<int64_t> read;
        for (int64_t i = 0; i < per_rank; ++i)
          for (int r = 0; r < world; ++r) read.push_back(s[r][e][i]);
        EXPECT_EQ(read, std::vector<int64_t>(order.begin(), order.begin() + per_rank * world))
            << "epoch " << e;
        EXPECT_EQ(std::set<int64_t>(read.begin(), read.end()).size(), read.size())
            << "an item read twice in epoch " << e;
      }
      EXPECT_NE(s[0][0], s[0][1]) << "a new epoch reshuffles";
      EXPECT_EQ(read_on_ranks(world, n, batch, workers, false, 3), s) << "same seed, same stream";
    }
  }
  EXPECT_NE(read_on_ranks(2, n, batch, 1, false, 1, 6), read_on_ranks(2, n, batch, 1, false, 1))
      << "another seed, another order";
}

TEST(LoaderRanks, AnEvaluationReadsEveryItemOnceWhateverTheWorld) {
  const int64_t n = 10, batch = 3;
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  for (int world = 1; world <= 3; ++world) {
    for (int64_t workers : {1, 3}) {
      const Streams s = read_on_ranks(world, n, batch, workers, /*eval=*/true, 2);
      for (int64_t e = 0; e < 2; ++e) {
        std::vector<int64_t> read;
        for (int r = 0; r < world; ++r) read.insert(read.end(), s[r][e].begin(), s[r][e].end());
        std::sort(read.begin(), read.end());
        EXPECT_EQ(read, all) << world << " ranks, workers " << workers << ", epoch " << e;
      }
    }
  }
}

// Item `bad` throws. Its rank's next() raises the error naming it; the rank waiting at the
// barrier fails fast; run_threads returns that error, whatever the workers.
class OneBad : public Items {
 public:
  OneBad() : Items(8) {}
  Sample get(int64_t i) const override {
    if (i == 5) throw std::runtime_error("item 5 is unreadable");
    return Items::get(i);
  }
};

TEST(LoaderRanks, ASampleErrorOnOneRankEndsTheRunNamingIt) {
  for (int64_t workers : {1, 3}) {
    auto ds = std::make_shared<OneBad>();
    DataConfig cfg;
    cfg.shuffle = false;  // rank 1 reads 1, 3, 5, 7: batch 1 holds item 5
    cfg.workers = workers;
    EXPECT_TRUE(test::throws_with(
        [&] {
          comm::run_threads(2, [&](comm::Communicator& c) {
            auto l = make_loader(ds, cfg, 2, c.rank(), c.size());
            for (int i = 0; i < 4; ++i) {
              l->next();
              c.barrier();
            }
          });
        },
        "Items(8) sample 5 (batch 1 of epoch 0) failed to load: item 5 is unreadable"))
        << "workers " << workers;
  }
}

// A sampler set to epoch 2 before the loader is made (as a PyTorch program calls
// set_epoch) starts the stream at epoch 2's order.
TEST(LoaderRanks, TheStreamStartsAtTheSamplersEpoch) {
  auto ds = std::make_shared<Items>(12);
  DistributedSampler s(12, 1, 2, 7);
  s.set_epoch(2);
  DataLoader l(ds, s, {.batch_size = 3});
  EXPECT_EQ(l.state(), (LoaderState{2, 0}));
  const Batch b = l.next();
  EXPECT_EQ(b.epoch, 2);
  const auto mine = s.indices();
  EXPECT_EQ(ids(b), std::vector<int64_t>(mine.begin(), mine.begin() + 3));
  s.set_epoch(-1);
  EXPECT_TRUE(test::throws_with([&] { DataLoader bad(ds, s, {.batch_size = 3}); },
                                "the sampler's epoch is -1"));
}

// State saved mid-epoch (2 of 3 batches read) and restored in a new loader with 3 workers
// gives the same batches as the loader that went on, across the epoch's end.
TEST(LoaderRanks, AStateSavedMidEpochResumesWithWorkers) {
  auto ds = std::make_shared<Items>(29);
  for (int64_t workers : {1, 3}) {
    for (int64_t prefetch : {0, 1, 3}) {
      const LoaderOptions o{.batch_size = 4, .prefetch = prefetch, .workers = workers};
      DataLoader a(ds, DistributedSampler(29, 1, 2, 8), o);  // 14 items, 3 batches
      a.next();
      a.next();
      const LoaderState saved = a.state();
      std::vector<std::vector<int64_t>> rest;
      for (int i = 0; i < 4; ++i) rest.push_back(ids(a.next()));
      DataLoader b(ds, DistributedSampler(29, 1, 2, 8), o);
      b.restore(saved);
      for (int i = 0; i < 4; ++i)
        EXPECT_EQ(ids(b.next()), rest[static_cast<size_t>(i)])
            << "batch " << i << ", workers " << workers << ", prefetch " << prefetch;
    }
  }
}

// A state saved at 2 ranks resumed at 3: restore() refuses a position of another world and
// says how to convert it; state_at_sample converts it to the samples not read yet.
TEST(LoaderRanks, AStateOfAnotherWorldIsConvertedNotRestored) {
  auto ds = std::make_shared<Items>(48);
  DataLoader two(ds, DistributedSampler(48, 0, 2, 3), {.batch_size = 4});  // 6 batches
  for (int i = 0; i < 3; ++i) two.next();
  const LoaderState saved = two.state();  // 3 batches of 2 x 4 read: 24 samples
  ASSERT_EQ(saved.position, 3);
  DataLoader three(ds, DistributedSampler(48, 0, 3, 3), {.batch_size = 4});  // 4 batches
  EXPECT_TRUE(test::throws_with([&] { three.restore(saved); },
                                "taken by a loader of 2 ranks x batch 4, not 3 ranks x batch 4"));
  DataLoader smaller(ds, DistributedSampler(48, 0, 2, 3), {.batch_size = 3});
  EXPECT_TRUE(test::throws_with([&] { smaller.restore(saved); },
                                "2 ranks x batch 4, not 2 ranks x batch 3"));
  smaller.restore({saved.epoch, saved.position});  // a bare position counts in its own layout
  EXPECT_EQ(smaller.state(), (LoaderState{0, 3, 3, 2}));
  three.restore(three.state_at_sample(saved.epoch, saved.position * 4 * 2));
  EXPECT_EQ(three.state(), (LoaderState{0, 2}));
  const auto order = global_order(48, 0, 3);
  EXPECT_EQ(ids(three.next()), (std::vector<int64_t>{order[24], order[27], order[30], order[33]}));
}

// A state saved over 48 items restored over 40: the epoch's shuffle is another order of
// other items, so restore() refuses it, naming both sizes and the way to go on anyway. A
// bare position (no size known) and state_at_sample's state (this loader's size) restore.
TEST(LoaderRanks, AStateOfADataSetOfAnotherSizeIsRefused) {
  DataLoader big(std::make_shared<Items>(48), DistributedSampler(48, 0, 2, 3), {.batch_size = 4});
  for (int i = 0; i < 3; ++i) big.next();
  const LoaderState saved = big.state();
  EXPECT_EQ(saved.dataset_size, 48);
  DataLoader small(std::make_shared<Items>(40), DistributedSampler(40, 0, 2, 3), {.batch_size = 4});
  EXPECT_TRUE(test::throws_with([&] { small.restore(saved); },
                                "taken over a data set of 48 samples, not the 40 of Items(40)"));
  EXPECT_TRUE(test::throws_with([&] { small.restore(saved); }, "state_at_sample(0, 3 x 4 x 2)"));
  EXPECT_EQ(small.state(), (LoaderState{0, 0}));        // unchanged by the refused restore
  EXPECT_FALSE(small.state_at_sample(0, 24) == saved);  // the same position, another data set
  small.restore({saved.epoch, saved.position});
  EXPECT_EQ(small.state(), (LoaderState{0, 3, 4, 2, 40}));
  small.restore(small.state_at_sample(saved.epoch, saved.position * 4 * 2));
  const auto order = global_order(40, 0, 3);
  EXPECT_EQ(ids(small.next()), (std::vector<int64_t>{order[24], order[26], order[28], order[30]}));
  DataLoader same(std::make_shared<Items>(48), DistributedSampler(48, 0, 2, 3), {.batch_size = 4});
  same.restore(saved);
  EXPECT_EQ(same.state(), saved);
}

}  // namespace
}  // namespace zt::data
