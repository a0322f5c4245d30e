// Lesson 19 — a model larger than one rank.
// Invariant: ZeRO-3 exists so that a model whose training states do not fit on one device
// trains across several. Each rank here gets a hard memory limit (its ledger refuses any
// allocation past it). A 32-layer MLP whose replicated training states (16 bytes per
// parameter with AdamW in fp32) need 3x that limit trains on 4 thread ranks, with the
// losses of plain single-process training; on one rank under the same limit it fails with
// an error that names the rank, the request, the limit and the largest consumers.
//
// Run alone: ctest --test-dir build -R zero.Lesson19
#include "zero/lesson_util.h"

using namespace zt;

namespace {

constexpr int64_t kWidth = 128, kDepth = 32, kGlobalBatch = 8;
constexpr int kSteps = 4;

// The model: lesson::TanhStack(kDepth, kWidth).
int64_t deep_numel() {
  return kDepth * (kWidth * kWidth + kWidth);
}
// A third of the replicated training state: 16 bytes per element / 3. A rank's shards
// of it on four ranks are 16 x numel / 4: three quarters of this limit.
int64_t rank_limit() {
  return 16 * deep_numel() / 3;
}

// The global batch of step s: x, target (kGlobalBatch, kWidth).
std::pair<Tensor, Tensor> global_batch(int s) {
  Generator g(100 + s);
  Tensor x = randn({kGlobalBatch, kWidth}, g);
  return {x, randn({kGlobalBatch, kWidth}, g)};
}

// Settings that bound every transient: nothing persistent or kept gathered between uses;
// two layers gathered at most (a layer is its weight and bias, kWidth x (kWidth + 1)
// elements), so the prefetcher, whose window reaches two layers ahead, stops at the live
// bound one layer ahead of the layer computing; one layer per gradient bucket.
zero::Config tight_config() {
  zero::Config c;
  c.stage3_param_persistence_threshold = 0;
  c.stage3_max_reuse_distance = 0;
  c.stage3_prefetch_bucket_size = 2 * (kWidth * kWidth + kWidth);
  c.stage3_max_live_parameters = 2 * (kWidth * kWidth + kWidth);
  c.reduce_bucket_size = kWidth * kWidth + kWidth;
  return c;
}

std::vector<double> train_single() {
  manual_seed(3);
  auto m = std::make_shared<lesson::TanhStack>(kDepth, kWidth);
  auto opt = optim::make_optimizer({}, m->named_parameters());
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = global_batch(s);
    m->zero_grad();
    Tensor loss = mse_loss((*m)(x), y);
    loss.backward();
    opt->step();
    losses.push_back(loss.item());
  }
  return losses;
}

// Trains under ZeRO-3 with this rank's ledger capped at rank_limit(); returns the global
// losses (mean over ranks of equal-sized batch slices = the single-process loss).
std::vector<double> train_limited(comm::Communicator& comm) {
  current_ledger()->set_limit(Device::cpu(), rank_limit());
  manual_seed(3);
  auto m = lesson::partitioned<lesson::TanhStack>(comm, kDepth, kWidth);
  zero::Engine engine(m, comm, tight_config(), {});
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = global_batch(s);
    Tensor loss = mse_loss(engine(lesson::rank_slice(x, comm)), lesson::rank_slice(y, comm));
    engine.backward(loss);
    engine.step();
    Tensor l = full({1}, loss.item(), DType::f64);
    comm.all_reduce(l, comm::ReduceOp::kAvg);
    losses.push_back(l.item());
  }
  // Reaching here means the ledger (which throws past the limit) was never exceeded. What
  // kept it so is the bound tight_config() sets on the transients:
  const zero::MemoryReport r = engine.memory_report();
  const zero::Config c = tight_config();
  const int64_t layer = kWidth * (kWidth + 1);
  EXPECT_LE(r.gathered_param_peak, (c.stage3_max_live_parameters + layer) * 4)
      << "two layers gathered at most, and the flat all-gather buffer of one while its "
         "weight and bias are copied out of it (lesson 16)";
  EXPECT_GT(engine.stats().prefetches_issued, 0) << "the next layer was prefetched";
  EXPECT_EQ(engine.stats().buckets_reduced, kDepth * kSteps) << "one layer per bucket";
  EXPECT_GT(memory_stats().total_peak, 3 * rank_limit() / 4)
      << "the limit was close to binding: four ranks' shards alone are 3/4 of it";
  return losses;
}

}  // namespace

TEST(Lesson19MemoryLimit, LedgerRefusesPastItsLimitAndChargesNothing) {
  auto ledger = std::make_shared<MemoryLedger>("rank 3");
  LedgerScope scope(ledger);
  ledger->set_limit(Device::cpu(), 1 << 20);
  Tensor a;
  {
    MemTagScope tag(MemTag::kOptimState);
    a = zeros({200 * 1024}, DType::f32);  // 800 KiB
  }
  const int64_t before = memory_stats().total_current;
  std::string msg;
  try {
    MemTagScope tag(MemTag::kActivation);
    Tensor b = zeros({100 * 1024}, DType::f32);  // 400 KiB more: over 1 MiB
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
  }
  ASSERT_FALSE(msg.empty()) << "the allocation past the limit must throw";
  for (const char* part : {"rank 3", "400.0 KiB", "activation", "1.0 MiB", "optim_state 800.0 KiB"})
    EXPECT_NE(msg.find(part), std::string::npos) << "missing '" << part << "' in: " << msg;
  EXPECT_EQ(memory_stats().total_current, before) << "a refused allocation charges nothing";
  ledger->set_limit(Device::cpu(), 0);
  Tensor b = zeros({100 * 1024}, DType::f32);  // no limit: fine
  EXPECT_EQ(memory_stats().total_current, before + 400 * 1024);
}

TEST(Lesson19MemoryLimit, ModelThreeTimesTheLimitTrainsOnFourRanks) {
  // rank_limit() is, by construction, a third of 16 bytes per parameter of this model.
  ASSERT_EQ(lesson::TanhStack(kDepth, kWidth).num_parameters(), deep_numel());
  const std::vector<double> expect = train_single();
  comm::run_threads(4, [&](comm::Communicator& comm) {
    std::vector<double> got = train_limited(comm);
    ASSERT_EQ(got.size(), expect.size());
    for (size_t s = 0; s < got.size(); ++s)
      EXPECT_NEAR(got[s], expect[s], 1e-5 * std::abs(expect[s])) << "step " << s;
  });
}

TEST(Lesson19MemoryLimit, TheSameModelOnOneRankFailsClearly) {
  std::string msg;
  try {
    comm::run_threads(1, [](comm::Communicator& comm) { train_limited(comm); });
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
  }
  ASSERT_FALSE(msg.empty()) << "one rank cannot hold 3x its limit";
  for (const char* part : {"rank 0 is out of memory on cpu", "would pass its limit of",
                           "Largest consumers:", "more ranks"})
    EXPECT_NE(msg.find(part), std::string::npos) << "missing '" << part << "' in: " << msg;
}
