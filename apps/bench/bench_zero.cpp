// zt-bench zero: step time of one model trained four ways —
//   single   one process, the whole batch
//   ddp      replicated data parallel (full replicas, gradients all-reduced)
//   zero3    ZeRO-3 without prefetching
//   zero3_pf ZeRO-3 with prefetching
// at --ranks N thread ranks (or one process per rank under mpirun), plus per-rank
// model-state bytes and communication bytes per step, and the time of an inference
// forward (under NoGradGuard, after the steps). One JSON object per line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "apps/bench/bench.h"
#include "apps/common/cli_checks.h"
#include "nn/nn.h"
#include "zero/zero.h"

namespace {
using namespace zt;

// A stack of `depth` (Linear width->width, LayerNorm, gelu) blocks and a head.
class Stack : public nn::UnaryModule {
 public:
  Stack(int64_t width, int depth) : nn::UnaryModule("Stack") {
    blocks = register_module("blocks", std::make_shared<nn::Sequential>());
    for (int i = 0; i < depth; ++i) {
      auto block = std::make_shared<nn::Sequential>();
      block->push_back(std::make_shared<nn::Linear>(width, width));
      block->push_back(std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({width})));
      block->push_back(std::make_shared<nn::GELU>());
      blocks->push_back(block);
    }
  }
  std::shared_ptr<nn::Sequential> blocks;

 protected:
  Tensor forward(const Tensor& x) override { return (*blocks)(x); }
};

struct Options {
  int ranks = 2;
  int64_t width = 512;
  int depth = 8;
  int64_t batch = 64;  // global
  int steps = 6;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The median of `times` past the first (a warm-up).
double median_after_first(std::vector<double> times) {
  return bench::median(std::vector<double>(times.begin() + 1, times.end()));
}

// The median time of `steps` calls of `forward` under NoGradGuard, the first a warm-up
// (under an engine it records the inference trace).
template <typename F>
double time_inference(int steps, const std::function<void()>& barrier, F forward) {
  autograd::NoGradGuard no_grad;
  std::vector<double> times;
  for (int s = 0; s < steps; ++s) {
    barrier();
    auto t0 = std::chrono::steady_clock::now();
    forward();
    times.push_back(seconds_since(t0));
  }
  return median_after_first(times);
}

struct Timing {
  double step = 0, inference = 0;  // seconds
};

// Runs `steps` steps (the first is a warm-up that also records the trace), then as many
// inference forwards; returns their median times and fills bytes.
Timing run_engine(comm::Communicator& comm, const Options& o, const std::string& mode,
                  zero::MemoryReport* mem, int64_t* comm_bytes) {
  manual_seed(1);
  std::shared_ptr<Stack> model;
  {
    zero::Init init(comm);
    if (mode == "ddp") {
      zero::Replicated replicas(comm);
      model = std::make_shared<Stack>(o.width, o.depth);
    } else {
      model = std::make_shared<Stack>(o.width, o.depth);
    }
  }
  zero::Config cfg;
  cfg.stage3_prefetch_bucket_size = mode == "zero3_pf" ? 4 * o.width * o.width : 0;
  cfg.stage3_param_persistence_threshold = o.width * 4;  // biases and norms persist
  cfg.stage3_max_reuse_distance = 0;
  cfg.reduce_bucket_size = 2 * o.width * o.width;
  zero::Engine engine(model, comm, cfg, {});
  ZT_CHECK(o.batch % comm.size() == 0, "--batch ", o.batch, " does not split evenly over ",
           comm.size(),
           " ranks (the modes would train on fewer samples than single); pass a "
           "multiple of ",
           comm.size());
  const int64_t local = o.batch / comm.size();
  Generator g(7 + comm.rank());
  Tensor x = randn({local, o.width}, g);
  std::vector<double> times;
  for (int s = 0; s < o.steps; ++s) {
    comm.barrier();
    if (s == o.steps - 1) comm.reset_counters();
    auto t0 = std::chrono::steady_clock::now();
    Tensor y = engine(x);
    engine.backward(mean(mul(y, y.detach())));
    engine.step();
    times.push_back(seconds_since(t0));
  }
  *mem = engine.memory_report();
  *comm_bytes = comm.counters().total_bytes();
  return {median_after_first(times), time_inference(
                                         o.steps, [&] { comm.barrier(); }, [&] { engine(x); })};
}

Timing run_single(const Options& o) {
  manual_seed(1);
  auto model = std::make_shared<Stack>(o.width, o.depth);
  auto opt = optim::make_optimizer({}, model->named_parameters());
  Generator g(7);
  Tensor x = randn({o.batch, o.width}, g);
  std::vector<double> times;
  for (int s = 0; s < o.steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    model->zero_grad();
    Tensor y = (*model)(x);
    mean(mul(y, y.detach())).backward();
    opt->step();
    times.push_back(seconds_since(t0));
  }
  return {median_after_first(times), time_inference(
                                         o.steps, [] {}, [&] { (*model)(x); })};
}

}  // namespace

ZT_BENCH(zero, "ZeRO-3 step time vs single process and replicated data parallel") {
  zt::bench::Cli app("zero");
  Options o;
  app.add_option("--ranks", o.ranks, "thread ranks for a plain start (ignored under mpirun)")
      ->check(zt::app::whole_number(1));
  app.add_option("--width", o.width, "width of each Linear block")->check(zt::app::whole_number(1));
  app.add_option("--depth", o.depth, "blocks (Linear, LayerNorm, gelu)")
      ->check(zt::app::whole_number(1));
  app.add_option("--batch", o.batch, "global batch (split over the ranks)")
      ->check(zt::app::whole_number(1));
  app.add_option("--steps", o.steps, "steps per mode (the first is a warm-up)")
      ->check(CLI::Range(2, 1 << 20));
  if (int rc = 0; !app.parse_args(args, &rc)) return rc;
  bool mpi = comm::under_mpirun();
  if (!mpi && o.batch % o.ranks != 0) {  // before anything prints (under mpirun: in each mode)
    std::fprintf(stderr,
                 "zt-bench zero: --batch %ld does not split evenly over --ranks %d (the modes "
                 "would train on fewer samples than single); pass a multiple of %d\n",
                 static_cast<long>(o.batch), o.ranks, o.ranks);
    return 1;
  }
  if (!mpi) {
    set_num_threads(1);
    const Timing t = run_single(o);
    std::printf(
        "{\"bench\":\"zero\",\"mode\":\"single\",\"ranks\":1,\"width\":%ld,\"depth\":%d,"
        "\"batch\":%ld,\"step_ms\":%.2f,\"infer_ms\":%.2f}\n",
        static_cast<long>(o.width), o.depth, static_cast<long>(o.batch), 1e3 * t.step,
        1e3 * t.inference);
  }
  double ddp_ms = 0;
  int64_t engine_params = Stack(o.width, o.depth).num_parameters();
  for (const char* mode : {"ddp", "zero3", "zero3_pf"}) {
    comm::launch(mpi ? 1 : o.ranks, [&](comm::Communicator& comm) {
      zero::MemoryReport mem;
      int64_t bytes = 0;
      const Timing t = run_engine(comm, o, mode, &mem, &bytes);
      if (comm.rank() != 0) return;
      if (std::string(mode) == "ddp") ddp_ms = 1e3 * t.step;
      // Replicas are not sharded state: for ddp the figure is 16 bytes per parameter.
      int64_t state = std::string(mode) == "ddp" ? 16 * engine_params : mem.model_state();
      std::printf(
          "{\"bench\":\"zero\",\"mode\":\"%s\",\"backend\":\"%s\",\"ranks\":%d,"
          "\"step_ms\":%.2f,\"vs_ddp\":%.3f,\"infer_ms\":%.2f,\"model_state_bytes\":%ld,"
          "\"gathered_peak_bytes\":%ld,\"comm_bytes_per_step\":%ld}\n",
          mode, comm.backend(), comm.size(), 1e3 * t.step, ddp_ms > 0 ? 1e3 * t.step / ddp_ms : 1.0,
          1e3 * t.inference, static_cast<long>(state), static_cast<long>(mem.gathered_param_peak),
          static_cast<long>(bytes));
      std::fflush(stdout);
    });
  }
  return 0;
}
