// zt-bench vqtok-step: one training step of the tiny Emu3-style tokenizer
// (docs/EMU3_TOKENIZER.md; codebook 1024, ch 32, ch_mult [1, 2, 2, 4]) on a batch of
// B clips x 4 frames x 32x32: forward, loss = MSE + L1 + VQ loss, backward, AdamW.
// Prints one JSON object with the median over --steps (after one warm-up step) of
//   forward_ms, backward_ms, step_ms (optimizer), total_ms   process CPU time
//   total_wall_ms                                            wall-clock time
// CPU time is the measure of record on CPU: the machine may be shared with other jobs.
// --device cuda times the same step on the GPU in wall-clock time, synchronizing at each
// phase boundary (forward_ms etc. are then wall times), under --tf32 (as train.tf32:
// TF32 convolutions by default, as the apps and PyTorch do).
// It then runs one more step without the phase clocks and prints the work it issued
// (dispatches_per_step etc.; on CUDA launches, host synchronizations and copies).
// --modules adds one JSON object per module type with its exclusive forward CPU time
// (time in the module minus time in its child modules), summed over the timed steps.
// --kernels then runs --steps more steps under a KernelProfile and prints one JSON object
// per kernel-table kernel with its calls and time per step (GPU time on a GPU).
// --zero runs the same step through a one-rank ZeRO-3 engine (partitioned shards,
// gathers, reduce-scatter into the flat gradient buffer, global norm, AdamW on the fp32
// masters) instead of plain AdamW on the module: the engine's own cost, side by side.
// --offload (with --zero) keeps the fp32 masters and AdamW's state in pinned host memory
// and updates them there (offload_optimizer), to show what that costs a step.
// --paired builds both, plain AdamW and the one-rank engine (same initial weights and
// batch), and alternates their steps in one process, printing a line for each: on a
// host-bound GPU step two processes can differ by more than the engine costs (the same
// run measured 61-65 ms in one and 47-69 ms in another), a pair of alternating steps
// shares the host's state.
// --api then runs --steps more steps of each trainer under an ApiProfile and prints the
// host time per step inside each CUDA runtime / cuBLAS / cuDNN call site (core/api_profile.h):
// where a host-bound step's time goes, and with --paired what the engine adds.
// --cuda-graph (with --device cuda) captures the whole step as a CUDA graph after two
// warm-up steps and replays it (core/step_graph.h): there are no phase clocks then, so
// forward/backward/step are 0 and total_ms is the wall time of a replayed step.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/bench/bench.h"
#include "apps/common/cli_checks.h"
#include "apps/common/train_util.h"
#include "apps/vqtok/model/vq_model.h"
#include "core/ops.h"
#include "core/step_graph.h"
#include "optim/adam.h"
#include "zero/zero.h"

namespace {

using zt::Tensor;

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Exclusive forward CPU time per module type, from pre/post forward hooks: a stack of
// open calls, each charging its children's time back to its parent.
class ModuleTimer {
 public:
  void attach(zt::nn::Module& root) {
    for (auto& [name, m] : root.named_modules()) {
      m->add_forward_pre_hook([this](zt::nn::Module&, std::vector<Tensor>&) {
        stack_.push_back({cpu_seconds(), 0.0});
      });
      m->add_forward_hook(
          [this](zt::nn::Module& mod, const std::vector<Tensor>&, std::vector<Tensor>&) {
            Open o = stack_.back();
            stack_.pop_back();
            const double inclusive = cpu_seconds() - o.start;
            if (enabled_) totals_[mod.type_name()] += inclusive - o.children;
            if (!stack_.empty()) stack_.back().children += inclusive;
          });
    }
  }
  void enable(bool on) { enabled_ = on; }
  const std::map<std::string, double>& totals() const { return totals_; }

 private:
  struct Open {
    double start, children;
  };
  std::vector<Open> stack_;
  std::map<std::string, double> totals_;
  bool enabled_ = false;
};

// The command line.
struct Options {
  zt::Device device = zt::Device::cpu();
  int batch = 8, steps = 3, threads = 1;
  bool modules = false, kernels = false, zero_engine = false, graphed = false, offload = false,
       paired = false, api = false;
};

// One way to train the model: plain AdamW on the module (comm null), or a ZeRO-3 engine on
// comm's rank (same AdamW settings), with the step's phases and their times.
struct Trainer {
  std::shared_ptr<zt::vq::VqModel> model;
  std::unique_ptr<zt::optim::AdamW> opt;
  std::unique_ptr<zt::zero::Engine> engine;
  std::vector<double> fwd, bwd, opt_ms, total, wall;
  double loss = 0;

  Trainer(zt::comm::Communicator* comm, const Options& o) {
    zt::manual_seed(6);
    model = std::make_shared<zt::vq::VqModel>(zt::config::ModelConfig{});
    if (comm) {
      zt::zero::partition(*model, *comm, o.device);  // the plain run's values, on the device
      zt::zero::Config cfg;
      if (o.offload) cfg.offload_optimizer = {zt::zero::OffloadDevice::kCpu, /*pin_memory=*/true};
      engine = std::make_unique<zt::zero::Engine>(
          model, *comm, cfg,
          zt::zero::OptimizerConfig{.type = "adamw", .lr = 1e-4, .weight_decay = 0.01});
    } else {
      model->to(o.device);
      opt = std::make_unique<zt::optim::AdamW>(model->named_parameters(),
                                               zt::optim::AdamWOptions(1e-4).weight_decay(0.01));
    }
  }
  const char* name() const { return engine ? "zero3" : "adamw"; }
  Tensor forward(const Tensor& video) {
    if (opt) opt->zero_grad();
    // call() is forward_train: {recon, codes, loss_vq, ...}; the engine's hooks see it.
    std::vector<Tensor> out = engine ? engine->forward({video}) : model->call({video});
    return zt::mse_loss(out[0], video) + zt::l1_loss(out[0], video) + out[2];
  }
  void backward(const Tensor& l) { engine ? engine->backward(l) : l.backward(); }
  void update() { engine ? (void)engine->step() : opt->step(); }
  void step(const Tensor& video) {
    backward(forward(video));
    update();
  }
};

// --cuda-graph: the step replayed from a CUDA graph, timed per step in wall-clock time
// (the GPU's time: each step waits for the previous one's loss).
int time_graphed(const Options& o, zt::optim::Optimizer* opt, zt::zero::Engine* engine,
                 const zt::StepGraph::Step& step) {
  engine ? engine->set_capturable(true) : opt->set_capturable(true);
  auto before_replay = [&] { engine ? engine->before_replay() : opt->before_replay(); };
  zt::StepGraph graph(o.device);
  double loss = 0;
  std::vector<double> wall;
  for (int i = 0; i < 3 + o.steps; ++i) {  // 2 warm-up steps, the capture, the timed replays
    auto w0 = std::chrono::steady_clock::now();
    loss = graph.run(step, before_replay)[0].item();
    if (i >= 3)
      wall.push_back(1e3 *
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
  }
  const std::string work = zt::bench::work_per_call_json([&] { graph.run(step, before_replay); });
  std::printf(
      "{\"bench\":\"vqtok-step\",\"device\":\"%s\",\"update\":\"%s\",%s,"
      "\"cuda_graph\":true,\"graph_nodes\":%zu,\"batch\":%d,\"frames\":4,\"size\":32,"
      "\"steps\":%d,\"forward_ms\":0,\"backward_ms\":0,\"step_ms\":0,\"total_ms\":%.2f,"
      "\"total_wall_ms\":%.2f,\"loss\":%.6f,%s}\n",
      o.device.str().c_str(), engine ? "zero3" : "adamw", zt::bench::gpu_math_json().c_str(),
      graph.nodes(), o.batch, o.steps, zt::bench::median(wall), zt::bench::median(wall), loss,
      work.c_str());
  std::fflush(stdout);
  return 0;
}

// Times `steps` steps (after one warm-up) and prints the results: plain AdamW on the
// calling thread (comm null), or through a ZeRO-3 engine on comm's rank, or (--paired)
// both, their steps alternating and which goes first alternating too (a bias from going
// first or second, a cache warmed by the other, falls on both alike).
int time_steps(zt::comm::Communicator* comm, const Options& o) {
  const zt::Device device = o.device;
  const int batch = o.batch, steps = o.steps;
  zt::set_num_threads(o.threads);  // a rank's thread starts with its own count
  std::vector<std::unique_ptr<Trainer>> trainers;
  if (!comm || o.paired) trainers.push_back(std::make_unique<Trainer>(nullptr, o));
  if (comm) trainers.push_back(std::make_unique<Trainer>(comm, o));
  zt::manual_seed(7);
  Tensor video = (zt::rand({batch, 4, 3, 32, 32}) * 2.0 - 1.0).to(device);
  // Phase clock: process CPU time on CPU; on the GPU, wall time after the queued work.
  const auto wall_start = std::chrono::steady_clock::now();
  auto clock = [&](const Tensor& last) {
    if (!device.is_cuda()) return cpu_seconds();
    zt::bench::sync(last);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  };
  Trainer& first = *trainers.front();
  ModuleTimer timer;
  if (o.modules) timer.attach(*first.model);

  if (o.graphed) {
    return time_graphed(o, first.opt.get(), first.engine.get(), [&] {
      Tensor l = first.forward(video);
      first.backward(l);
      first.update();
      return std::vector<Tensor>{l};
    });
  }
  for (int i = 0; i <= steps; ++i) {
    timer.enable(i > 0);
    for (size_t k = 0; k < trainers.size(); ++k) {
      auto& t = trainers[i % 2 == 0 ? k : trainers.size() - 1 - k];
      auto w0 = std::chrono::steady_clock::now();
      const double c0 = clock(video);
      Tensor l = t->forward(video);
      const double c1 = clock(l);
      t->backward(l);
      const double c2 = clock(video);
      t->update();
      const double c3 = clock(video);
      auto w1 = std::chrono::steady_clock::now();
      t->loss = l.item();
      if (i == 0) continue;
      t->fwd.push_back(1e3 * (c1 - c0));
      t->bwd.push_back(1e3 * (c2 - c1));
      t->opt_ms.push_back(1e3 * (c3 - c2));
      t->total.push_back(1e3 * (c3 - c0));
      t->wall.push_back(1e3 * std::chrono::duration<double>(w1 - w0).count());
    }
  }
  timer.enable(false);
  for (auto& t : trainers) {
    const std::string work = zt::bench::work_per_call_json([&] { t->step(video); });
    std::printf(
        "{\"bench\":\"vqtok-step\",\"device\":\"%s\",\"update\":\"%s\",\"offload\":%s,"
        "\"paired\":%s,%s,\"batch\":%d,\"frames\":4,\"size\":32,\"threads\":%d,"
        "\"steps\":%d,\"forward_ms\":%.1f,\"backward_ms\":%.1f,\"step_ms\":%.2f,"
        "\"total_ms\":%.1f,\"total_wall_ms\":%.1f,\"loss\":%.6f,%s}\n",
        device.str().c_str(), t->name(), t->engine && o.offload ? "true" : "false",
        o.paired ? "true" : "false", zt::bench::gpu_math_json().c_str(), batch, o.threads, steps,
        zt::bench::median(t->fwd), zt::bench::median(t->bwd), zt::bench::median(t->opt_ms),
        zt::bench::median(t->total), zt::bench::median(t->wall), t->loss, work.c_str());
  }
  if (o.paired) {
    const double plain = zt::bench::median(first.total);
    const double zero = zt::bench::median(trainers.back()->total);
    std::printf(
        "{\"bench\":\"vqtok-step\",\"paired\":true,\"adamw_ms\":%.1f,\"zero3_ms\":%.1f,"
        "\"zero3_over_adamw\":%.3f}\n",
        plain, zero, plain > 0 ? zero / plain : 0.0);
  }
  if (o.api) {
    for (auto& t : trainers) {
      const std::string fields =
          std::string("\"bench\":\"vqtok-step\",\"update\":\"") + t->name() + "\"";
      std::fputs(zt::bench::api_profile_json(fields, steps,
                                             [&] {
                                               t->step(video);
                                               zt::bench::sync(video);
                                             })
                     .c_str(),
                 stdout);
    }
  }
  if (o.modules) {
    for (auto& [type, sec] : timer.totals())
      std::printf("{\"bench\":\"vqtok-step\",\"module\":\"%s\",\"forward_ms_per_step\":%.2f}\n",
                  type.c_str(), 1e3 * sec / std::max(steps, 1));
  }
  if (o.kernels)
    std::fputs(
        zt::bench::kernel_profile_json("vqtok-step", steps, [&] { first.step(video); }).c_str(),
        stdout);
  std::fflush(stdout);
  return 0;
}

// Registered by hand: the subcommand name has a dash, which ZT_BENCH cannot spell.
int run_vqtok_step(const std::vector<std::string>& args) {
  zt::bench::Cli app("vqtok-step");
  Options o;
  std::string device_name = "cpu";
  app.add_option("--batch", o.batch, "clips per batch (4 frames of 32x32 each)")
      ->check(zt::app::whole_number(1));
  app.add_option("--steps", o.steps, "timed steps (after one warm-up step)")
      ->check(zt::app::whole_number(1));
  app.add_option("--threads", o.threads, "kernel and BLAS threads")
      ->check(zt::app::whole_number(1));
  app.add_flag("--modules", o.modules, "also print exclusive forward time per module type");
  app.add_flag("--kernels", o.kernels,
               "then run --steps more steps under a kernel profile and print each kernel's "
               "time per step");
  app.add_flag("--zero", o.zero_engine, "step through a one-rank ZeRO-3 engine, not plain AdamW");
  app.add_flag("--offload", o.offload,
               "with --zero: fp32 masters and AdamW state in pinned host memory, updated there");
  app.add_flag("--paired", o.paired,
               "plain AdamW and the one-rank ZeRO-3 engine in one process, steps alternating "
               "(a line each, then their ratio)");
  app.add_flag("--api", o.api,
               "then run --steps more steps of each trainer and print the host time per step "
               "in each GPU library call site");
  app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--cuda-graph", o.graphed,
               "capture the step as a CUDA graph after 2 warm-up steps and replay it (cuda)");
  app.add_gpu_math_options();
  if (int rc = 0; !app.parse_args(args, &rc)) return rc;
  o.device = zt::Device::parse(device_name);
  auto refuse = [](const char* why) {
    std::fprintf(stderr, "zt-bench vqtok-step: %s\n", why);
    return 1;
  };
  if (const std::string why = o.device.is_cuda() ? zt::app::cuda_missing() : ""; !why.empty())
    return refuse(("--device cuda " + why).c_str());
  if (o.graphed && (!o.device.is_cuda() || o.modules || o.kernels || o.api))
    return refuse("--cuda-graph needs --device cuda (and no --modules, --kernels or --api)");
  if (o.offload && ((!o.zero_engine && !o.paired) || o.graphed))
    return refuse(
        "--offload needs --zero or --paired (and no --cuda-graph: the host update cannot be "
        "captured)");
  if (o.paired && (o.graphed || o.modules || o.kernels))
    return refuse("--paired times eager steps: no --cuda-graph, --modules or --kernels");
  if (!o.zero_engine && !o.paired) return time_steps(nullptr, o);
  int rc = 0;
  zt::comm::run_threads(1, [&](zt::comm::Communicator& comm) { rc = time_steps(&comm, o); });
  return rc;
}

const zt::bench::Registrar kRegisterVqtokStep(
    "vqtok-step",
    "one training step of the default small vqtok model, 4.29M parameters, on clips of 4 frames "
    "of 32x32 (--batch, --steps, --modules, --kernels, --api, --zero, "
    "--offload, --paired, --cuda-graph)",
    run_vqtok_step);

}  // namespace
