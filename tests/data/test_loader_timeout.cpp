// A dataset whose get() never returns (a file on a hung mount) must not hang the run: with
// LoaderOptions::timeout (data.timeout) next() throws a zt::Error naming the dataset, the
// batch, the samples whose get() has not returned and the timeout, and the loader's
// destructor and restore() give up on the stuck thread after the timeout instead of waiting
// for it. The thread is left holding the dataset, so nothing it uses is freed under it; it
// ends when its get() returns. Here get() waits on a gate each test opens at its end, and
// each test checks that the dataset is then freed: no thread outlives the test.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "core/ops/factory.h"
#include "data/factory.h"
#include "data/loader.h"

namespace zt::data {
namespace {

using Clock = std::chrono::steady_clock;

// Opened once; get() of a held item waits for it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  }
};

// Items 0..n-1 in order; the `held` ones return only once the gate is open.
class Held : public Dataset {
 public:
  Held(int64_t n, std::set<int64_t> held, std::shared_ptr<Gate> gate)
      : n_(n), held_(std::move(held)), gate_(std::move(gate)) {}
  int64_t size() const override { return n_; }
  Sample get(int64_t i) const override {
    if (held_.count(i)) gate_->wait();
    return Sample{full({1, 3, 1, 1}, static_cast<double>(i)), i, i};
  }
  std::string describe() const override { return "Held(" + std::to_string(n_) + ")"; }

 private:
  int64_t n_;
  std::set<int64_t> held_;
  std::shared_ptr<Gate> gate_;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Opens the gate after `after` seconds unless the test does first: a loader that waits for
// the stuck get() (no timeout honoured) then fails the test's time checks instead of hanging.
class Watchdog {
 public:
  Watchdog(std::shared_ptr<Gate> gate, double after)
      : thread_([gate, after, this] {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait_for(lock, std::chrono::duration<double>(after), [&] { return done_; });
          gate->release();
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Waits (up to 20 s) for the last reference to the dataset to go: the thread left in get()
// has ended.
bool freed(const std::weak_ptr<const Dataset>& ds) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!ds.expired() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return ds.expired();
}

std::vector<int64_t> ids(const Batch& b) {
  std::vector<int64_t> v;
  for (double x : b.indices.to_vector()) v.push_back(static_cast<int64_t>(x));
  return v;
}

// Not shuffled, batches of 4: batch 1 holds items 4..7, of which 5 is stuck.
DistributedSampler in_order(int64_t n) {
  return DistributedSampler(n, 0, 1, 0, /*shuffle=*/false);
}

// A loader over 8 items in order, batches of 4 read by `workers` with a timeout of `timeout`
// seconds, whose item `held` waits for `gate`; the loader alone holds the dataset, which `watch`
// sees.
struct HeldLoader {
  HeldLoader(int64_t held, int64_t workers, double timeout = 0.2) {
    auto ds = std::make_shared<Held>(8, std::set<int64_t>{held}, gate);
    watch = ds;
    loader = std::make_unique<DataLoader>(
        ds, in_order(8), LoaderOptions{.batch_size = 4, .workers = workers, .timeout = timeout});
  }
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::weak_ptr<const Dataset> watch;
  std::unique_ptr<DataLoader> loader;
};

TEST(LoaderTimeout, ABatchNotReadyInTimeIsAnErrorAndTheLoaderStillGoes) {
  for (int64_t workers : {1, 3}) {
    SCOPED_TRACE(testing::Message() << "workers " << workers);
    HeldLoader h(5, workers);
    Watchdog dog(h.gate, 10.0);
    auto& l = h.loader;
    EXPECT_EQ(ids(l->next()), (std::vector<int64_t>{0, 1, 2, 3}));
    auto t0 = Clock::now();
    const std::string what = test::error_of([&] { l->next(); });
    EXPECT_LT(seconds_since(t0), 5.0) << "next() waited past its timeout";
    for (const char* part : {"DataLoader::next: batch 1 of epoch 0 of Held(8)",
                             "not ready within the timeout of 0.2 s",
                             "get() has not returned for sample(s) 5", "raise the timeout"})
      EXPECT_NE(what.find(part), std::string::npos) << "missing '" << part << "' in: " << what;
    // Waiting again for the batch: once the sample returns it comes, and the stream goes on.
    EXPECT_TRUE(test::throws_with([&] { l->next(); }, "sample(s) 5"));
    h.gate->release();
    EXPECT_EQ(ids(l->next()), (std::vector<int64_t>{4, 5, 6, 7}));
    EXPECT_EQ(ids(l->next()), (std::vector<int64_t>{0, 1, 2, 3}));
    t0 = Clock::now();
    l.reset();
    EXPECT_LT(seconds_since(t0), 5.0);
    EXPECT_TRUE(freed(h.watch));
  }
}

// The loader destroyed (or restored elsewhere) while a get() is stuck: it gives the thread
// the timeout to finish, then leaves it, and the dataset lives on until the get() returns.
TEST(LoaderTimeout, ALoaderLeavesAThreadStuckInGetAndItsDatasetLivesOn) {
  for (bool destroy : {true, false}) {
    for (int64_t workers : {1, 3}) {
      SCOPED_TRACE(testing::Message() << "destroy " << destroy << ", workers " << workers);
      HeldLoader h(1, workers);
      Watchdog dog(h.gate, 10.0);
      auto& l = h.loader;
      EXPECT_TRUE(test::throws_with([&] { l->next(); }, "batch 0 of epoch 0"));
      const auto t0 = Clock::now();
      if (destroy) {
        l.reset();
      } else {
        l->restore({0, 1}, 1);  // batch 1 alone (items 4..7), read by a new thread
        EXPECT_EQ(ids(l->next()), (std::vector<int64_t>{4, 5, 6, 7}));
      }
      EXPECT_LT(seconds_since(t0), 5.0) << "the loader waited for the stuck get()";
      EXPECT_FALSE(h.watch.expired()) << "the dataset was freed under the stuck get()";
      h.gate->release();
      l.reset();
      EXPECT_TRUE(freed(h.watch)) << "the thread left in get() did not end";
    }
  }
}

// A run reads next() in the scope that owns its loader, so the loader is destroyed while the
// timeout's error unwinds to where it is printed. The error is out about one timeout after the
// call, not two: the loader does not wait a second time for the get() it has just reported.
TEST(LoaderTimeout, AStuckBatchIsReportedAfterOneTimeoutNotTwo) {
  for (int64_t workers : {1, 3}) {
    SCOPED_TRACE(testing::Message() << "workers " << workers);
    HeldLoader h(5, workers, 0.5);
    Watchdog dog(h.gate, 10.0);
    EXPECT_EQ(ids(h.loader->next()), (std::vector<int64_t>{0, 1, 2, 3}));
    const auto t0 = Clock::now();
    const std::string what = test::error_of([&] {
      const std::unique_ptr<DataLoader> run = std::move(h.loader);
      run->next();
    });
    const double took = seconds_since(t0);
    EXPECT_NE(what.find("get() has not returned for sample(s) 5"), std::string::npos) << what;
    EXPECT_LT(took, 0.9) << "the error of a timeout of 0.5 s came after " << took << " s";
    EXPECT_FALSE(h.watch.expired()) << "the dataset was freed under the stuck get()";
    h.gate->release();
    EXPECT_TRUE(freed(h.watch)) << "the thread left in get() did not end";
  }
}

// Without a timeout next() waits for a batch without limit, but a loader that stops (the run
// ends, or unwinds from another error, while a batch is being prefetched) does not: it gives the
// samples being read kStopWait seconds, as PyTorch's DataLoader gives its workers at shutdown,
// then leaves the thread holding the dataset, and says so on stderr, naming the samples.
TEST(LoaderTimeout, WithoutATimeoutALoaderStillStopsAfterABoundedWait) {
  HeldLoader h(5, 1, /*timeout=*/0);
  Watchdog dog(h.gate, kStopWait + 10);
  EXPECT_EQ(ids(h.loader->next()), (std::vector<int64_t>{0, 1, 2, 3}));  // batch 1 is prefetched
  std::this_thread::sleep_for(std::chrono::milliseconds(50));            // and its get(5) started
  ::testing::internal::CaptureStderr();
  const auto t0 = Clock::now();
  h.loader.reset();
  const double took = seconds_since(t0);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_LT(took, kStopWait + 5) << "the loader waited for the stuck get()";
  EXPECT_FALSE(h.watch.expired()) << "the dataset was freed under the stuck get()";
  for (const char* part : {"Held(8)", "sample(s) 5", "batch 1 of epoch 0", "has not returned"})
    EXPECT_NE(said.find(part), std::string::npos) << "missing '" << part << "' in: " << said;
  h.gate->release();
  EXPECT_TRUE(freed(h.watch)) << "the thread left in get() did not end";
}

TEST(LoaderTimeout, ATimeoutIsSecondsAtOrAbove0WithPrefetch) {
  auto ds = std::make_shared<Held>(4, std::set<int64_t>{}, std::make_shared<Gate>());
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_TRUE(test::throws_with([&] { DataLoader l(ds, in_order(4), {.timeout = bad}); },
                                  "timeout must be a number of seconds >= 0"));
  EXPECT_TRUE(test::throws_with(
      [&] { DataLoader l(ds, in_order(4), {.prefetch = 0, .timeout = 1}); }, "prefetch >= 1"));
  DataLoader none(ds, in_order(4), {.prefetch = 0});  // 0: no limit, reads in next()
  EXPECT_EQ(ids(none.next()), (std::vector<int64_t>{0}));
}

// A timeout is a wait the clock can time: the longest taken (kMaxTimeout, about 31 years)
// waits for a slow batch, and a longer one, whose nanoseconds would overflow the clock's
// count and end the wait at once, is refused rather than failing every batch at once.
TEST(LoaderTimeout, TheLongestTimeoutWaitsAndALongerOneIsRefused) {
  auto gate = std::make_shared<Gate>();
  auto ds = std::make_shared<Held>(4, std::set<int64_t>{0}, gate);
  for (double too_long : {kMaxTimeout * 1.5, 1e10, 1e300})
    EXPECT_TRUE(test::throws_with([&] { DataLoader l(ds, in_order(4), {.timeout = too_long}); },
                                  "longer than a wait can be timed"));
  DataLoader l(ds, in_order(4), {.timeout = kMaxTimeout});
  Watchdog dog(gate, 0.3);  // item 0 comes after 0.3 s
  EXPECT_EQ(ids(l.next()), (std::vector<int64_t>{0}));
}

// data.timeout reaches the loader make_loader builds.
TEST(LoaderTimeout, MakeLoaderPassesTheConfigsTimeout) {
  auto gate = std::make_shared<Gate>();
  Watchdog dog(gate, 10.0);
  std::shared_ptr<const Dataset> ds = std::make_shared<Held>(8, std::set<int64_t>{0}, gate);
  const std::weak_ptr<const Dataset> watch = ds;
  DataConfig cfg;
  cfg.shuffle = false;  // batch 0: items 0..3
  cfg.timeout = 0.2;
  auto l = make_loader(ds, cfg, 4, 0, 1);
  ds.reset();
  EXPECT_EQ(l->options().timeout, 0.2);
  EXPECT_TRUE(test::throws_with([&] { l->next(); }, "within the timeout of 0.2 s"));
  l.reset();
  gate->release();
  EXPECT_TRUE(freed(watch));
}

}  // namespace
}  // namespace zt::data
