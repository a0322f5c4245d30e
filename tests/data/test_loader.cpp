// DataLoader: batches are the sampler's indices in order, stacked; the stream is the
// same whatever the prefetch depth or worker count; state()/restore() resume it exactly
// (also across epochs) and, through state_at_sample, under another world or batch size;
// a failing sample surfaces in next(), naming the problem; the loader's threads use the
// creating thread's kernel thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

#include "common/test_util.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/parallel.h"
#include "data/loader.h"

namespace zt::data {
namespace {

// Clip i is filled with the value i; label 10 * i. Index `bad` throws.
class Counting : public Dataset {
 public:
  explicit Counting(int64_t n, int64_t bad = -1, int64_t odd_shape = -1)
      : n_(n), bad_(bad), odd_(odd_shape) {}
  int64_t size() const override { return n_; }
  Sample get(int64_t i) const override {
    ZT_CHECK(i != bad_, "Counting: sample ", i, " is broken");
    Tensor c = full({2, 3, i == odd_ ? 3 : 2, 2}, static_cast<double>(i));
    return Sample{c, 10 * i, i};
  }
  std::string describe() const override { return "Counting(" + std::to_string(n_) + ")"; }

 private:
  int64_t n_, bad_, odd_;
};

std::vector<int64_t> ids(const Batch& b) {
  std::vector<int64_t> v;
  for (double x : b.indices.to_vector()) v.push_back(static_cast<int64_t>(x));
  return v;
}

TEST(Loader, BatchesFollowTheSamplerAndStack) {
  auto ds = std::make_shared<Counting>(23);
  DistributedSampler sampler(23, 1, 2, 9);
  DataLoader loader(ds, sampler, {.batch_size = 4, .prefetch = 2});
  EXPECT_EQ(loader.batches_per_epoch(), 2);  // 11 per rank -> 2 full batches
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    DistributedSampler s = sampler;
    s.set_epoch(epoch);
    const auto expect = s.indices();
    std::vector<int64_t> got;
    for (int64_t p = 0; p < 2; ++p) {
      Batch b = loader.next();
      EXPECT_EQ(b.epoch, epoch);
      EXPECT_EQ(b.position, p);
      ASSERT_EQ(b.clips.sizes(), (Shape{4, 2, 3, 2, 2}));
      const auto v = ids(b);
      const auto clips = b.clips.to_vector();
      const auto labels = b.labels.to_vector();
      for (int64_t k = 0; k < 4; ++k) {
        EXPECT_EQ(clips[k * 24], static_cast<double>(v[k]));
        EXPECT_EQ(clips[k * 24 + 23], static_cast<double>(v[k]));
        EXPECT_EQ(labels[k], 10.0 * v[k]);
      }
      got.insert(got.end(), v.begin(), v.end());
    }
    EXPECT_EQ(got, std::vector<int64_t>(expect.begin(), expect.begin() + 8));
  }
}

TEST(Loader, SameStreamForAnyPrefetchAndWorkers) {
  auto ds = std::make_shared<Counting>(40);
  auto run = [&](int64_t prefetch, int64_t workers) {
    DataLoader l(ds, DistributedSampler(40, 0, 1, 3),
                 {.batch_size = 6, .prefetch = prefetch, .workers = workers});
    std::vector<int64_t> all;
    for (int i = 0; i < 15; ++i) {
      auto v = ids(l.next());
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const auto ref = run(0, 1);
  EXPECT_EQ(run(1, 1), ref);
  EXPECT_EQ(run(4, 1), ref);
  EXPECT_EQ(run(3, 3), ref);
  EXPECT_EQ(run(0, 4), ref);
}

TEST(Loader, KeepsIncompleteLastBatchWithoutDropLast) {
  auto ds = std::make_shared<Counting>(10);
  DataLoader l(ds, DistributedSampler(10, 0, 1, 0, false), {.batch_size = 4, .drop_last = false});
  EXPECT_EQ(l.batches_per_epoch(), 3);
  l.next();
  l.next();
  Batch last = l.next();
  EXPECT_EQ(ids(last), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(l.next().epoch, 1);
}

TEST(Loader, StateRestoreResumesExactly) {
  auto ds = std::make_shared<Counting>(30);
  DistributedSampler sampler(30, 0, 2, 11);
  DataLoader a(ds, sampler, {.batch_size = 4, .prefetch = 3});  // 3 batches per epoch
  for (int i = 0; i < 5; ++i) a.next();
  const LoaderState st = a.state();
  EXPECT_EQ(st, (LoaderState{1, 2}));
  std::vector<std::vector<int64_t>> expect;
  for (int i = 0; i < 5; ++i) expect.push_back(ids(a.next()));

  DataLoader b(ds, sampler, {.batch_size = 4, .prefetch = 2});
  b.next();  // wherever it was, restore moves it
  b.restore(st);
  EXPECT_EQ(b.state(), st);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ids(b.next()), expect[i]) << "batch " << i;

  EXPECT_THROW(b.restore({0, 3}), Error);  // past the end of an epoch
}

// Counts the reads of each sample.
class ReadCounting : public Dataset {
 public:
  explicit ReadCounting(int64_t n) : reads_(static_cast<size_t>(n)) {}
  int64_t size() const override { return static_cast<int64_t>(reads_.size()); }
  Sample get(int64_t i) const override {
    ++reads_[static_cast<size_t>(i)];
    ++total_;
    return Sample{full({1, 3, 2, 2}, static_cast<double>(i)), 0, i};
  }
  std::string describe() const override { return "ReadCounting"; }
  int64_t reads(int64_t i) const { return reads_[static_cast<size_t>(i)]; }
  int64_t total() const { return total_; }

 private:
  mutable std::vector<std::atomic<int64_t>> reads_;
  mutable std::atomic<int64_t> total_{0};
};

// Waits (up to 20 s) until `ds` has read at least `n` samples.
void wait_for_reads(const ReadCounting& ds, int64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ds.total() < n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Restoring the position a loader is at keeps the batches it prepared (a resume at the
// start of the stream): no sample is read twice.
TEST(Loader, RestoringThePositionItIsAtKeepsThePreparedBatches) {
  auto ds = std::make_shared<ReadCounting>(16);
  DataLoader l(ds, DistributedSampler(16), {.batch_size = 4, .prefetch = 2});
  l.restore({0, 0});  // starts preparing
  wait_for_reads(*ds, 8);
  ASSERT_EQ(ds->total(), 8) << "two batches prepared";
  l.restore({0, 0});
  // The two prepared batches; meanwhile the loader prepares at most the epoch's other two.
  EXPECT_EQ(l.next().position, 0);
  EXPECT_EQ(l.next().position, 1);
  for (int64_t i = 0; i < 16; ++i) EXPECT_LE(ds->reads(i), 1) << "sample " << i;
}

// A loader reads nothing until it is asked for a batch or restored: a resumed run's loader
// decodes no batch of the stream's start that the restore would throw away.
TEST(Loader, ReadsNothingBeforeTheFirstNextOrRestore) {
  auto ds = std::make_shared<ReadCounting>(16);
  DataLoader l(ds, DistributedSampler(16), {.batch_size = 4, .prefetch = 2});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ds->total(), 0);
  l.restore({0, 2});
  EXPECT_EQ(l.next().position, 2);
  EXPECT_EQ(ds->reads(0), 0) << "batch 0 was prepared and thrown away";
}

// restore(state, n) prepares and returns n batches (across an epoch's end too), then next()
// throws; an evaluation that reads a fixed number of batches decodes none past them.
TEST(Loader, RestoreWithACountPreparesNoBatchPastIt) {
  auto ds = std::make_shared<ReadCounting>(16);
  DataLoader l(ds, DistributedSampler(16), {.batch_size = 4, .prefetch = 3});  // 4 per epoch
  l.restore({0, 3}, 2);
  EXPECT_EQ(l.next().position, 3);
  const Batch b = l.next();
  EXPECT_EQ((LoaderState{b.epoch, b.position}), (LoaderState{1, 0}));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ds->total(), 8) << "only the two batches asked for are read";
  try {
    l.next();
    ADD_FAILURE() << "next() past the batches restore() allowed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("restore() allowed"), std::string::npos) << e.what();
  }
  l.restore({1, 1});  // where it stands: the producer waiting at the end goes on
  EXPECT_EQ(l.next().position, 1);
  l.restore({0, 0});  // lifts the end
  for (int i = 0; i < 5; ++i) l.next();
  EXPECT_EQ(l.state(), (LoaderState{1, 1}));
  EXPECT_THROW(l.restore({0, 0}, -1), Error);
}

// A stream saved at 2 ranks x batch 3 continues at 3 ranks x batch 2 (or 1 rank x batch 4)
// with the samples the saved run had not read yet: the epoch's global order is one list
// that the ranks take round-robin, whatever their number.
TEST(Loader, StateAtSampleContinuesTheGlobalOrderUnderAnotherLayout) {
  auto ds = std::make_shared<Counting>(48);
  // The samples `world` ranks x `batch` read next, in global order, after `samples` of epoch 1.
  auto global_rest = [&](int64_t world, int64_t batch, int64_t samples, int batches) {
    std::vector<int64_t> out;
    std::vector<std::unique_ptr<DataLoader>> loaders;
    for (int64_t r = 0; r < world; ++r) {
      loaders.push_back(std::make_unique<DataLoader>(ds, DistributedSampler(48, r, world, 5),
                                                     LoaderOptions{.batch_size = batch}));
      loaders.back()->restore(loaders.back()->state_at_sample(1, samples));
    }
    for (int k = 0; k < batches; ++k) {
      std::vector<std::vector<int64_t>> b;
      for (auto& l : loaders) b.push_back(ids(l->next()));
      for (int64_t i = 0; i < batch; ++i)  // rank r's item i is global item i * world + r
        for (int64_t r = 0; r < world; ++r) out.push_back(b[r][i]);
    }
    return out;
  };
  DistributedSampler all(48, 0, 1, 5);
  all.set_epoch(1);
  const std::vector<int64_t> order = all.indices();
  // 2 ranks x batch 3 stopped after 4 batches of epoch 1: 24 samples read.
  EXPECT_EQ(global_rest(3, 2, 24, 2), std::vector<int64_t>(order.begin() + 24, order.begin() + 36));
  EXPECT_EQ(global_rest(1, 4, 24, 3), std::vector<int64_t>(order.begin() + 24, order.begin() + 36));
  // 6 samples a batch (3 ranks x 2): 30 is batch 5; 29 lies inside batch 4, read again.
  DataLoader l(ds, DistributedSampler(48, 0, 3, 5), {.batch_size = 2});
  EXPECT_EQ(l.state_at_sample(1, 30), (LoaderState{1, 5}));
  EXPECT_EQ(l.state_at_sample(1, 29), (LoaderState{1, 4}));
  // At or past the epoch's last whole batch: the next epoch.
  EXPECT_EQ(l.state_at_sample(1, 48), (LoaderState{2, 0}));
  EXPECT_THROW(l.state_at_sample(-1, 0), Error);
}

// The epoch count never overflows, however far a (damaged) checkpoint's position puts it:
// the last batch of epoch INT64_MAX has no next epoch, so it is refused, and so are a
// position and a batch count that would count past it. The batch before it reads.
TEST(Loader, TheEpochCountNeverOverflows) {
  constexpr int64_t kLast = std::numeric_limits<int64_t>::max();
  auto ds = std::make_shared<Counting>(8);
  for (int64_t prefetch : {0, 2}) {
    DataLoader l(ds, DistributedSampler(8), {.batch_size = 4, .prefetch = prefetch});  // 2
    l.restore({kLast, 0});
    EXPECT_EQ(l.next().position, 0) << "prefetch " << prefetch;
    EXPECT_TRUE(test::throws_with([&] { l.next(); },
                                  "DataLoader::next: batch 1 of epoch 9223372036854775807 is the "
                                  "last an epoch count reaches"))
        << "prefetch " << prefetch;
    EXPECT_EQ(l.state(), (LoaderState{kLast, 1}));
    EXPECT_TRUE(test::throws_with([&] { l.state_at_sample(kLast, 8); },
                                  "sample 8 is past the end of epoch 9223372036854775807"));
    EXPECT_TRUE(test::throws_with(
        [&] {
          l.restore({kLast, 1}, 2);
        },
        "go past the last epoch an epoch count reaches"));
  }
}

// Without drop_last the sampler pads 10 samples to 12 for 3 ranks (ranks 1 and 2 get a
// repeat as their 4th); the padding ends their last batch and is not counted as unpadded.
TEST(Loader, UnpaddedLeavesOutTheRepeatsThatEvenOutTheRanks) {
  auto ds = std::make_shared<Counting>(10);
  std::vector<int64_t> real;
  for (int64_t r = 0; r < 3; ++r) {
    DataLoader l(ds, DistributedSampler(10, r, 3, 4, true, /*drop_last=*/false),
                 {.batch_size = 2, .drop_last = false});
    ASSERT_EQ(l.batches_per_epoch(), 2);
    for (int i = 0; i < 2; ++i) real.push_back(l.unpadded(l.next()));
  }
  EXPECT_EQ(real, (std::vector<int64_t>{2, 2, 2, 1, 2, 1}));
  // With drop_last nothing is padded.
  DataLoader d(ds, DistributedSampler(10, 2, 3, 4), {.batch_size = 3});
  EXPECT_EQ(d.unpadded(d.next()), 3);
}

TEST(Loader, SampleErrorsSurfaceInOrder) {
  auto ds = std::make_shared<Counting>(8, /*bad=*/5);
  DataLoader l(ds, DistributedSampler(8, 0, 1, 0, false),
               {.batch_size = 2, .prefetch = 2, .workers = 2});
  EXPECT_EQ(ids(l.next()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ids(l.next()), (std::vector<int64_t>{2, 3}));
  try {
    l.next();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample 5 is broken"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ids(l.next()), (std::vector<int64_t>{6, 7}));
}

// Two broken samples in one batch, read by two workers: the later one fails at once, the
// earlier one only after the later one's error is in. The error raised is still the
// earlier sample's (batch order), whichever worker saw its failure first.
class TwoBroken : public Counting {
 public:
  TwoBroken() : Counting(4) {}
  Sample get(int64_t i) const override {
    if (i == 3) {
      std::lock_guard<std::mutex> lock(mu_);
      later_failed_ = true;
      cv_.notify_all();
      ZT_FAIL("TwoBroken: sample 3 is broken");
    }
    if (i == 2) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(5), [&] { return later_failed_; });
      ZT_FAIL("TwoBroken: sample 2 is broken");
    }
    return Counting::get(i);
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable bool later_failed_ = false;
};

TEST(Loader, TheFirstBrokenSampleInBatchOrderIsReported) {
  auto ds = std::make_shared<TwoBroken>();
  DataLoader l(ds, DistributedSampler(4, 0, 1, 0, false), {.batch_size = 2, .workers = 2});
  EXPECT_EQ(ids(l.next()), (std::vector<int64_t>{0, 1}));
  try {
    l.next();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sample 2 is broken"), std::string::npos) << what;
    EXPECT_EQ(what.find("sample 3"), std::string::npos) << what;
  }
}

// Reads that wait (up to a few seconds) for another read to be in progress: how many were
// in progress at once.
class Overlapping : public Counting {
 public:
  Overlapping() : Counting(4) {}
  Sample get(int64_t i) const override {
    std::unique_lock<std::mutex> lock(mu_);
    most_ = std::max(most_, ++in_progress_);
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return in_progress_ >= 2 || most_ >= 2; });
    --in_progress_;
    return Counting::get(i);
  }
  int most() const { return most_; }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int in_progress_ = 0, most_ = 0;
};

TEST(Loader, WorkersReadEverySampleOfASmallBatchAtOnce) {
  // A batch of 2 with 2 workers: both samples are read at the same time (the first is not
  // read alone before the others).
  auto ds = std::make_shared<Overlapping>();
  DataLoader l(ds, DistributedSampler(4, 0, 1, 0, false),
               {.batch_size = 2, .prefetch = 0, .workers = 2});
  EXPECT_EQ(ids(l.next()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ds->most(), 2);
}

// Records the kernel thread count (num_threads()) each read runs with.
class ThreadCounting : public Counting {
 public:
  ThreadCounting() : Counting(8) {}
  Sample get(int64_t i) const override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(num_threads());
    }
    return Counting::get(i);
  }
  std::vector<int> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<int> seen_;
};

TEST(Loader, ThreadsRunOnTheCreatingThreadsShare) {
  // A count that differs from the process default a new thread starts with (a thread rank's
  // share, say): the producer reads with all of it, two workers with half each.
  int fresh = 0;
  std::thread([&] { fresh = num_threads(); }).join();
  const int share = 2 * (fresh + 1);
  std::thread([&] {
    set_num_threads(share);
    for (int64_t prefetch : {0, 2}) {
      for (int64_t workers : {1, 2}) {
        auto ds = std::make_shared<ThreadCounting>();
        DataLoader l(ds, DistributedSampler(8, 0, 1, 0, false),
                     {.batch_size = 2, .prefetch = prefetch, .workers = workers});
        l.next();
        l.next();
        const int want = workers == 1 ? share : share / 2;
        const std::vector<int> seen = ds->seen();  // the producer may read on
        EXPECT_GE(seen.size(), 4u);
        EXPECT_EQ(seen, std::vector<int>(seen.size(), want))
            << "prefetch " << prefetch << ", workers " << workers << "; a new thread has " << fresh;
      }
    }
  }).join();
}

TEST(Loader, MismatchedShapesAreAnError) {
  auto ds = std::make_shared<Counting>(4, -1, /*odd_shape=*/1);
  DataLoader l(ds, DistributedSampler(4, 0, 1, 0, false), {.batch_size = 2, .prefetch = 0});
  try {
    l.next();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must share a shape"), std::string::npos) << e.what();
  }
}

TEST(Loader, TooFewSamplesForABatch) {
  auto ds = std::make_shared<Counting>(6);
  EXPECT_THROW(DataLoader(ds, DistributedSampler(6, 0, 2), {.batch_size = 4}), Error);
  EXPECT_THROW(DataLoader(ds, DistributedSampler(7, 0, 1), {.batch_size = 1}), Error);
}

}  // namespace
}  // namespace zt::data
