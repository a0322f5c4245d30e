// The data pipeline as a program that embeds zt uses it: its own Dataset subclass (items
// of different shapes, a dataset of 0 or 1 items or fewer than the ranks' batches, an item
// that throws, one that is slow) fed through DataLoader and make_loader with 1 to 3
// workers. A sample's error reaches next() naming the dataset, the sample and the batch,
// whatever it threw; a loader destroyed or restored while its threads read stops them
// after the samples in progress.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "data/factory.h"
#include "data/loader.h"

namespace zt::data {
namespace {

// Item i is a (1, 3, 2, 2) clip of the value i, label i. Index `bad` throws `kind`:
// 0 a std::out_of_range, 1 a value that is no std::exception. Reads may each take
// `delay`; reads are counted.
class UserData : public Dataset {
 public:
  explicit UserData(int64_t n, int64_t bad = -1, int kind = 0,
                    std::chrono::milliseconds delay = std::chrono::milliseconds(0))
      : n_(n), bad_(bad), kind_(kind), delay_(delay), item_reads_(static_cast<size_t>(n)) {}
  int64_t size() const override { return n_; }
  Sample get(int64_t i) const override {
    ++reads_;
    ++item_reads_[static_cast<size_t>(i)];
    std::this_thread::sleep_for(delay_);
    if (i == bad_) {
      if (kind_ == 0) throw std::out_of_range("no row " + std::to_string(i) + " in the table");
      throw 42;
    }
    return Sample{full({1, 3, 2, 2}, static_cast<double>(i)), i, i};
  }
  std::string describe() const override { return "UserData(" + std::to_string(n_) + ")"; }
  int64_t reads() const { return reads_; }
  // Reads of items 0..n-1.
  int64_t reads_below(int64_t n) const {
    int64_t sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += item_reads_[static_cast<size_t>(i)];
    return sum;
  }

 private:
  int64_t n_, bad_;
  int kind_;
  std::chrono::milliseconds delay_;
  mutable std::atomic<int64_t> reads_{0};
  mutable std::vector<std::atomic<int64_t>> item_reads_;
};

std::vector<int64_t> ids(const Batch& b) {
  std::vector<int64_t> v;
  for (double x : b.indices.to_vector()) v.push_back(static_cast<int64_t>(x));
  return v;
}

// An exception of any type from a user's get(), read by 1 or 3 workers, on the background
// thread or in next(): next() raises a zt::Error that names the dataset, the sample and its
// batch, and keeps the original (std::rethrow_if_nested); the stream then goes on.
TEST(UserDataset, AnExceptionFromGetNamesTheDatasetTheSampleAndTheBatch) {
  for (int kind : {0, 1}) {
    for (int64_t workers : {1, 3}) {
      for (int64_t prefetch : {0, 2}) {
        SCOPED_TRACE(testing::Message()
                     << "kind " << kind << ", workers " << workers << ", prefetch " << prefetch);
        auto ds = std::make_shared<UserData>(12, /*bad=*/7, kind);
        DataLoader l(ds, DistributedSampler(12, 0, 1, 0, /*shuffle=*/false),
                     {.batch_size = 4, .prefetch = prefetch, .workers = workers});
        EXPECT_EQ(ids(l.next()), (std::vector<int64_t>{0, 1, 2, 3}));
        try {
          l.next();
          ADD_FAILURE() << "expected an error";
        } catch (const Error& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("UserData(12) sample 7"), std::string::npos) << what;
          EXPECT_NE(what.find("batch 1 of epoch 0"), std::string::npos) << what;
          EXPECT_NE(what.find(kind == 0 ? "no row 7 in the table" : "not a std::exception"),
                    std::string::npos)
              << what;
          bool original = false;
          try {
            std::rethrow_if_nested(e);
          } catch (const std::out_of_range&) {
            original = true;
          } catch (int v) {
            original = v == 42;
          }
          EXPECT_TRUE(original) << "the dataset's own exception is nested in the error";
        }
        EXPECT_EQ(l.state(), (LoaderState{0, 2}));
        EXPECT_EQ(ids(l.next()), (std::vector<int64_t>{8, 9, 10, 11}));
      }
    }
  }
}

// A zt::Error from get() (the library's own datasets raise these) gets the same context.
class ZtErrorData : public UserData {
 public:
  ZtErrorData() : UserData(4) {}
  Sample get(int64_t i) const override {
    ZT_CHECK(i != 2, "the file of item ", i, " is gone");
    return UserData::get(i);
  }
};

TEST(UserDataset, AZtErrorFromGetGetsTheSameContext) {
  DataLoader l(std::make_shared<ZtErrorData>(), DistributedSampler(4, 0, 1, 0, false),
               {.batch_size = 2, .workers = 2});
  l.next();
  EXPECT_TRUE(test::throws_with([&] { l.next(); },
                                "DataLoader: UserData(4) sample 2 (batch 1 of epoch 0) failed to "
                                "load: the file of item 2 is gone"));
}

// Items of different shapes: batch 1 stacks each as it is; a batch of two says which
// samples differ and how to make them agree.
class Shapes : public UserData {
 public:
  Shapes() : UserData(4) {}
  Sample get(int64_t i) const override {
    return Sample{full({1 + i, 3, 2, 2 + i}, static_cast<double>(i)), 0, i};
  }
};

TEST(UserDataset, ItemsOfDifferentShapes) {
  auto ds = std::make_shared<Shapes>();
  DataLoader one(ds, DistributedSampler(4, 0, 1, 0, false), {.batch_size = 1, .workers = 3});
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(one.next().clips.sizes(), (Shape{1, 1 + i, 3, 2, 2 + i}));
  DataLoader two(ds, DistributedSampler(4, 0, 1, 0, false), {.batch_size = 2, .workers = 3});
  const std::string what = test::error_of([&] { two.next(); });
  for (const char* part :
       {"UserData(4) sample 1 has shape [2, 3, 2, 3] but sample 0 has [1, 3, 2, 2]",
        "make get() return one shape, or read with batch_size 1"})
    EXPECT_NE(what.find(part), std::string::npos) << what;
}

// A Subset's batches hold its own indices, not its base's (which Sample::index keeps).
TEST(UserDataset, ASubsetsBatchesHoldItsOwnIndices) {
  auto sub = std::make_shared<Subset>(std::make_shared<UserData>(10), std::vector<int64_t>{7, 2});
  DataLoader l(sub, DistributedSampler(2, 0, 1, 0, false), {.batch_size = 2, .workers = 2});
  const Batch b = l.next();
  EXPECT_EQ(ids(b), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(b.clips.to_vector()[0], 7.0);
  EXPECT_EQ(b.labels.to_vector(), (std::vector<double>{7, 2}));
}

// An empty dataset is refused where the loader is made, naming it.
TEST(UserDataset, AnEmptyDatasetIsRefusedNamingIt) {
  auto ds = std::make_shared<UserData>(0);
  EXPECT_TRUE(test::throws_with([&] { DistributedSampler s(0); }, "the dataset is empty"));
  DataConfig cfg;
  for (bool eval : {false, true})
    EXPECT_TRUE(test::throws_with([&] { make_loader(ds, cfg, 2, 0, 1, eval); },
                                  "(UserData(0)) holds 0 samples"))
        << "eval " << eval;
}

// One item and three ranks: an evaluation (no drop_last) gives each rank that item, and
// only rank 0 counts it; training refuses to start, as for any set smaller than
// ranks x batch.
TEST(UserDataset, ADatasetSmallerThanTheRanksBatches) {
  auto one = std::make_shared<UserData>(1);
  DataConfig cfg;
  std::vector<int64_t> counted;
  for (int64_t r = 0; r < 3; ++r) {
    auto l = make_loader(one, cfg, 2, r, 3, /*eval=*/true);
    ASSERT_EQ(l->batches_per_epoch(), 1);
    const Batch b = l->next();
    EXPECT_EQ(ids(b), (std::vector<int64_t>{0}));
    counted.push_back(l->unpadded(b));
  }
  EXPECT_EQ(counted, (std::vector<int64_t>{1, 0, 0}));
  auto five = std::make_shared<UserData>(5);
  EXPECT_TRUE(test::throws_with([&] { make_loader(five, cfg, 2, 0, 3); },
                                "holds 5 samples, fewer than one batch of 2"));
  EXPECT_TRUE(test::throws_with([&] { make_loader(one, cfg, 1, 0, 3); }, "holds 1 sample"));
}

// workers 0 (PyTorch's "read in the calling thread") is refused, saying what does that here.
TEST(UserDataset, WorkersZeroSaysWhatReadsInTheCallingThread) {
  auto ds = std::make_shared<UserData>(4);
  EXPECT_TRUE(test::throws_with([&] { DataLoader l(ds, DistributedSampler(4), {.workers = 0}); },
                                "prefetch = 0"));
}

// A loader destroyed, or restored elsewhere, while it reads a batch of slow samples waits
// only for the samples in progress, not for the rest of the batch; no read follows.
TEST(UserDataset, StoppingALoaderMidBatchWaitsOnlyForTheReadsInProgress) {
  for (int64_t workers : {1, 3}) {
    for (bool destroy : {true, false}) {
      SCOPED_TRACE(testing::Message() << "workers " << workers << ", destroy " << destroy);
      // Not shuffled: batch 0 is items 0..31, batch 1 items 32..63.
      auto ds = std::make_shared<UserData>(64, -1, 0, std::chrono::milliseconds(50));
      auto l = std::make_unique<DataLoader>(ds, DistributedSampler(64, 0, 1, 0, false),
                                            LoaderOptions{.batch_size = 32, .workers = workers});
      l->restore({0, 0});  // starts reading batch 0
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (ds->reads() == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (destroy) {
        l.reset();
      } else {
        l->restore({0, 1}, 1);  // batch 1 alone
        EXPECT_EQ(ids(l->next()).front(), 32);
      }
      const int64_t batch0 = ds->reads_below(32);
      // A few reads per worker at most (the stop is not instant on a busy machine); without
      // the stop, all 32.
      EXPECT_LT(batch0, 16) << "the rest of batch 0 was read after the stop";
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      EXPECT_EQ(ds->reads_below(32), batch0) << "a read of batch 0 after the stop";
      EXPECT_EQ(ds->reads() - batch0, destroy ? 0 : 32);
    }
  }
}

}  // namespace
}  // namespace zt::data
