// zt-bench vqgpt: training throughput of vqgpt (a config, default configs/vqgpt_tiny.yaml,
// with a random-init tokenizer: speed does not depend on its weights). For each setting
// rank 0 prints one JSON object: tokens/s (trained target tokens of all ranks per second),
// step time, the tokenizer's time and share of the step, and collective calls/bytes per
// step. Settings, each with train.batch clips per rank:
//   mode zero3          the GPT partitioned with ZeRO-3 (prefetch on), N = 1 and 2 thread ranks
//   mode replicated_dp  the GPT built under zero::Replicated with requires_grad on: the
//                       engine all-reduces replica gradients (plain data parallelism); it
//                       trains in f32 whatever train.dtype says (a replica keeps no fp32
//                       master, so the engine refuses a 16-bit one)
// Each line says its GPT's dtype ("dtype").
// Under mpirun each process is a rank (MPI) and only the world size is measured.
// train.device cuda (--device cuda, a shortcut for --set train.device=cuda) runs on the GPU: one
// thread rank, or one GPU per process under mpirun (NCCL); each step then ends with a
// synchronization so that its time is complete.

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/bench/bench.h"
#include "apps/common/app_cli.h"
#include "apps/common/cli_checks.h"
#include "apps/common/train_util.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "core/ops.h"
#include "data/factory.h"

namespace {

using namespace zt;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void measure(const config::AppConfig& cfg, bool replicated_dp, int warmup, int steps, Device device,
             comm::Communicator& comm) {
  // As the app: the GPU of this rank (NCCL), and train.tf32 / train.attention applied.
  config::TrainConfig train = cfg.train;
  train.device = device.is_cuda() ? "cuda" : "cpu";
  device = app::train_device(train, comm, "zt-bench vqgpt");
  auto tok = vqgpt::random_tokenizer(cfg, comm, device);
  auto model = vqgpt::build_model(cfg, tok, comm, replicated_dp);
  auto engine = vqgpt::make_engine(model, cfg, comm, app::EngineUse::training);
  auto loader = data::make_loader(data::make_dataset(cfg.data), cfg.data, cfg.train.batch,
                                  comm.rank(), comm.size());
  model->train();
  // The GPT's storage and compute dtype: train.dtype's when partitioned, f32 for replicas.
  const DType gpt_dtype = model->gpt->parameters().front().dtype();
  if (comm.rank() == 0 && gpt_dtype != cfg.zero.precision.dtype())
    std::fprintf(stderr,
                 "zt-bench vqgpt: note: replicated_dp trains the GPT in %s, not train.dtype's %s "
                 "(a replica is updated without an fp32 master, so it stays f32)\n",
                 dtype_name(gpt_dtype), dtype_name(cfg.zero.precision.dtype()));
  double tok_s = 0.0, step_s = 0.0;
  for (int i = 0; i < warmup + steps; ++i) {
    if (i == warmup) {
      comm.barrier();
      comm.reset_counters();
      tok_s = step_s = 0.0;
    }
    data::Batch b = loader->next();
    const Clock::time_point t0 = Clock::now();
    Tensor seq = model->tokenize(b.clips);
    bench::sync(seq);  // on a GPU: the tokenizer's GPU time, not just its launches
    tok_s += since(t0);
    engine->backward(model->loss(seq));
    engine->step();
    bench::sync(seq);  // on a GPU: wait for the step's queued work
    step_s += since(t0);
  }
  const comm::CommCounters counters = comm.counters();
  Tensor t = from_vector({tok_s, step_s}, {2}, DType::f64);
  app::all_reduce_host(comm, t, comm::ReduceOp::kAvg);  // rank means
  const auto v = t.to_vector();
  if (comm.rank() != 0) return;
  const double per_step = v[1] / steps, tok_per_step = v[0] / steps;
  const int64_t targets = (model->layout().length() - 1) * cfg.train.batch * comm.size();
  std::printf(
      "{\"bench\":\"vqgpt\",\"device\":\"%s\",\"mode\":\"%s\",\"dtype\":\"%s\",\"backend\":\"%s\","
      "\"ranks\":%d,"
      "\"batch_per_rank\":%lld,\"tokens_per_step\":%lld,\"gpt_params\":%lld,"
      "\"tokenizer_params\":%lld,\"step_s\":%.5f,\"tokenizer_s\":%.5f,\"tokenizer_share\":%.3f,"
      "\"gpt_s\":%.5f,\"tokens_per_s\":%.1f,\"comm_calls_per_step\":%.1f,"
      "\"comm_bytes_per_step\":%.0f}\n",
      device.str().c_str(), replicated_dp ? "replicated_dp" : "zero3", dtype_name(gpt_dtype),
      comm.backend(), comm.size(), static_cast<long long>(cfg.train.batch),
      static_cast<long long>(targets),
      static_cast<long long>(model->gpt->spec().count_parameters()),
      static_cast<long long>(model->tokenizer->num_parameters()), per_step, tok_per_step,
      tok_per_step / per_step, per_step - tok_per_step, static_cast<double>(targets) / per_step,
      static_cast<double>(counters.total_calls()) / steps,
      static_cast<double>(counters.total_bytes()) / steps);
  std::fflush(stdout);
}

}  // namespace

ZT_BENCH(vqgpt, "vqgpt tokens/s, tokenizer share, ZeRO-3 vs replicated DP (N=1,2; mpirun)") {
  zt::bench::Cli app("vqgpt");
  std::string config_path = "configs/vqgpt_tiny.yaml";
  std::vector<int> ranks = {1, 2};
  int warmup = 2, steps = 10;
  std::vector<std::string> sets;
  std::string device_name;
  app.add_option("--device", device_name,
                 "cpu or cuda, shortcut for --set train.device=D (on a GPU: 1 thread rank, or "
                 "mpirun)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--config", config_path, "vqgpt config")->check(CLI::ExistingFile);
  app.add_option("--ranks", ranks, "thread-rank counts to measure (ignored under mpirun)")
      ->check(zt::app::whole_number(1));
  app.add_option("--warmup", warmup, "untimed steps first (the first records the trace)")
      ->check(zt::app::whole_number(0));
  app.add_option("--steps", steps, "timed steps")->check(zt::app::whole_number(1));
  app.add_option("--set", sets, "override a config value, e.g. --set train.batch=4")
      ->check(zt::app::kKeyValue);
  if (int rc = 0; !app.parse_args(args, &rc)) return rc;
  // The device is train.device, as in the apps: --device last, so that it wins.
  std::vector<config::Override> overrides(sets.begin(), sets.end());
  if (!device_name.empty())
    overrides.push_back({"train.device=" + device_name, "--device " + device_name});
  // As the apps: under mpirun a config on standard input reaches rank 0 alone, which sends it
  // on, and one that does not load is one error, printed by rank 0.
  const config::AppConfig cfg =
      zt::app::load_config_on_ranks(config_path, overrides, config::App::vqgpt);
  const Device device = Device::parse(cfg.train.device);
  if (cfg.train.cuda_graph) {
    std::fprintf(stderr,
                 "zt-bench vqgpt: times eager steps: train.cuda_graph is not supported (vqgpt "
                 "train takes it)\n");
    return 1;
  }
  if (device.is_cuda() && app.count("--ranks") && ranks != std::vector<int>{1}) {
    std::fprintf(stderr,
                 "zt-bench vqgpt: train.device cuda runs one rank (thread ranks exchange host "
                 "memory): use --ranks 1, or mpirun for more GPUs\n");
    return 1;
  }
  if (const std::string why = device.is_cuda() ? zt::app::cuda_missing() : ""; !why.empty()) {
    std::fprintf(stderr, "zt-bench vqgpt: train.device cuda %s\n", why.c_str());
    return 1;
  }
  if (device.is_cuda()) ranks = {1};
  if (comm::under_mpirun()) ranks = {0};  // the world size
  for (int n : ranks)
    for (bool dp : {false, true}) {
      comm::LaunchOptions opts;
      opts.ranks = n == 0 ? 1 : n;
      opts.device = device;  // under mpirun a GPU starts NCCL, one GPU per process
      comm::launch(
          opts, [&](comm::Communicator& comm) { measure(cfg, dp, warmup, steps, device, comm); });
    }
  return 0;
}
