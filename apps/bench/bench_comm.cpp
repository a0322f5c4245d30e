// zt-bench comm: throughput of all_gather, reduce_scatter and all_reduce against message
// size. A plain start measures ThreadComm with --ranks N; under mpirun each process is a
// rank (MpiComm). Rank 0 prints one JSON object per (collective, size):
//   bytes    the full message (all_gather output, reduce_scatter input, all_reduce tensor)
//   algbw    bytes / seconds;  busbw: algbw * (N-1)/N (gather, scatter), 2(N-1)/N (reduce)
#include <cstdio>
#include <string>
#include <vector>

#include "apps/bench/bench.h"
#include "apps/common/cli_checks.h"
#include "core/ops.h"
#include "zero/comm/launch.h"
#include "zero/comm/mpi_comm.h"

namespace {

using zt::DType;
using zt::Tensor;
using zt::comm::Communicator;
using zt::comm::ReduceOp;

// checked: each collective preceded by MpiComm's same-collective check (thread ranks
// compare their calls in every case).
void run_sizes(Communicator& c, int64_t min_bytes, int64_t max_bytes, int reps, bool checked) {
  const int n = c.size();
  const double ratio = static_cast<double>(n - 1) / n;
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int64_t numel = std::max<int64_t>(n, bytes / 4 / n * n);  // f32, divisible by N
    Tensor full = zt::ones({numel}, DType::f32);
    Tensor shard = zt::ones({numel / n}, DType::f32);
    struct Case {
      const char* op;
      double bus;
      std::function<void()> fn;
    };
    std::vector<Case> cases = {
        {"all_gather", ratio, [&] { c.all_gather(full, shard); }},
        {"reduce_scatter", ratio, [&] { c.reduce_scatter(shard, full, ReduceOp::kSum); }},
        {"all_reduce", 2 * ratio, [&] { c.all_reduce(full, ReduceOp::kSum); }},
    };
    for (const Case& k : cases) {
      c.barrier();
      double s = zt::bench::time_per_call(k.fn, 2, reps);
      const double b = static_cast<double>(numel) * 4;
      if (c.rank() == 0) {
        std::printf(
            "{\"bench\":\"comm\",\"backend\":\"%s\",\"ranks\":%d,\"op\":\"%s\",\"dtype\":\"f32\","
            "\"checked\":%s,\"bytes\":%lld,\"seconds\":%.6e,\"algbw_GBps\":%.3f,\"busbw_GBps\":%."
            "3f}\n",
            c.backend(), n, k.op, checked ? "true" : "false", static_cast<long long>(b), s,
            b / s / 1e9, b / s / 1e9 * k.bus);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

ZT_BENCH(comm, "collective throughput vs message size (--ranks N; mpirun: MPI)") {
  zt::bench::Cli app("comm");
  int ranks = 2, reps = 5;
  bool unchecked = false;
  int64_t min_bytes = 4096, max_bytes = 16 << 20;
  app.add_option("--ranks", ranks, "thread ranks for a plain start (ignored under mpirun)")
      ->check(zt::app::whole_number(1));
  app.add_option("--min-bytes", min_bytes, "smallest message")->check(zt::app::whole_number(1));
  app.add_option("--max-bytes", max_bytes, "largest message (sizes grow 4x)")
      ->check(zt::app::whole_number(1));
  app.add_option("--reps", reps, "timed repetitions per size (median reported)")
      ->check(zt::app::whole_number(1));
  app.add_flag("--unchecked", unchecked,
               "mpirun: without the check that every rank issued the same collective "
               "(MpiComm::set_check_collectives), to show what it costs");
  if (int rc = 0; !app.parse_args(args, &rc)) return rc;
  if (min_bytes > max_bytes) {
    std::fprintf(stderr, "zt-bench comm: --min-bytes %lld is above --max-bytes %lld\n",
                 static_cast<long long>(min_bytes), static_cast<long long>(max_bytes));
    return 1;
  }
  zt::comm::LaunchOptions opts;
  opts.ranks = zt::comm::under_mpirun() ? 1 : ranks;
  zt::comm::launch(opts, [&](Communicator& c) {
    // Thread ranks compare their calls in every case; only MPI's check can be turned off.
    auto* mpi = dynamic_cast<zt::comm::MpiComm*>(&c);
    if (mpi) mpi->set_check_collectives(!unchecked);
    run_sizes(c, min_bytes, max_bytes, reps, !unchecked || mpi == nullptr);
  });
  return 0;
}
