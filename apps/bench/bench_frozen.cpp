// zt-bench frozen: per-call time of a small frozen Conv3d + BatchNorm3d module at N ranks
//   plain     built outside any scope
//   replica   built in zero::Replicated inside zero::Init (zt's way: no hooks, no comm)
//   gathered  partitioned, called inside GatheredParameters (the other stacks' way)
// Goal: replica / plain <= 1.02. One JSON object per line.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "apps/bench/bench.h"
#include "apps/common/cli_checks.h"
#include "nn/nn.h"
#include "zero/zero.h"

namespace {
using namespace zt;

class Frozen : public nn::UnaryModule {
 public:
  Frozen() : nn::UnaryModule("Frozen") {
    conv = register_module(
        "conv", std::make_shared<nn::Conv3d>(nn::Conv3dOptions(4, 4, 3).padding({1, 1, 1})));
    bn = register_module("bn", std::make_shared<nn::BatchNorm3d>(nn::BatchNormOptions(4)));
  }
  std::shared_ptr<nn::Conv3d> conv;
  std::shared_ptr<nn::BatchNorm3d> bn;

 protected:
  Tensor forward(const Tensor& x) override { return (*bn)((*conv)(x)); }
};

double per_call(const std::function<void()>& fn, int calls) {
  for (int i = 0; i < 3; ++i) fn();
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, t / calls);
  }
  return best;
}
}  // namespace

ZT_BENCH(frozen, "frozen module per-call time: plain vs Replicated vs GatheredParameters") {
  zt::bench::Cli app("frozen");
  int ranks = 2, calls = 200;
  app.add_option("--ranks", ranks, "thread ranks for a plain start (ignored under mpirun)")
      ->check(zt::app::whole_number(1));
  app.add_option("--calls", calls, "forward calls per timed repetition (best of 5 reported)")
      ->check(zt::app::whole_number(1));
  if (int rc = 0; !app.parse_args(args, &rc)) return rc;
  comm::launch(comm::under_mpirun() ? 1 : ranks, [&](comm::Communicator& comm) {
    autograd::NoGradGuard ng;
    Generator g(3);
    Tensor x = randn({2, 4, 4, 8, 8}, g);  // (B, C, T, H, W)
    auto plain = std::make_shared<Frozen>();
    plain->eval();
    std::shared_ptr<Frozen> replica, parted;
    {
      zero::Init init(comm);
      {
        zero::Replicated frozen(comm);
        replica = std::make_shared<Frozen>();
      }
      parted = std::make_shared<Frozen>();
    }
    replica->eval();
    parted->eval();
    comm.barrier();
    double t_plain = per_call([&] { (*plain)(x); }, calls);
    comm.barrier();
    comm.reset_counters();
    double t_replica = per_call([&] { (*replica)(x); }, calls);
    int64_t replica_calls = comm.counters().total_calls();
    comm.barrier();
    double t_gathered = per_call(
        [&] {
          zero::GatheredParameters gp(*parted, comm);
          (*parted)(x);
        },
        calls);
    if (comm.rank() == 0) {
      std::printf(
          "{\"bench\":\"frozen\",\"ranks\":%d,\"backend\":\"%s\",\"plain_us\":%.1f,"
          "\"replica_us\":%.1f,\"gathered_us\":%.1f,\"replica_over_plain\":%.3f,"
          "\"gathered_over_plain\":%.2f,\"replica_collectives\":%ld}\n",
          comm.size(), comm.backend(), 1e6 * t_plain, 1e6 * t_replica, 1e6 * t_gathered,
          t_replica / t_plain, t_gathered / t_plain, static_cast<long>(replica_calls));
    }
  });
  return 0;
}
