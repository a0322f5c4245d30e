// zt-bench gpt: training steps of a decoder-only transformer (zt::gpt) on random tokens,
// by default GPT-2 small's shape (12 layers, 768 wide, 12 heads, context 1024, vocabulary
// 50304), through the ZeRO-3 engine (one rank, or --ranks thread ranks on the CPU), in f32
// or bf16 (fp32 master shards). Prints one JSON object: the step split (forward, backward,
// optimizer), tokens/s, memory per tag, and model FLOP utilization
//   FLOPs per step = (6 N + 12 L E T) x tokens
// (N the parameters that multiply, "matmul_params": all but the position table and an
// untied token table, which are lookups; L layers, E width, T context: the dense matmuls'
// multiply-adds, forward
// and backward, plus attention's scores and weighted sums; causal masking not discounted),
// MFU = FLOPs per second / --peak-tflops (default: H200 dense bf16 989, f32 67, f32 under
// --tf32 all 494.7 TFLOP/s on a GPU; none on the CPU, where only the achieved TFLOP/s are
// printed). The loss reads
// the logits in their own dtype (the fused cross-entropy keeps its sums in f32 and
// double): no full-vocabulary f32 copy of bf16 logits. --kernels adds
// one line per kernel-table kernel with its time per step (GPU time on a GPU).
// --qkv: fused (the default, GPT-2's c_attn): one q/k/v projection per block; separate:
// three, whose input gradients are added up. --attention picks scaled_dot_product_attention's
// kernels (auto: fused on a GPU for bf16, the GEMM path otherwise; math: the GEMM path everywhere),
// so one GPU run can show what the fused kernels save. --cuda-graph (cuda, one rank) captures the
// whole step after two warm-up steps and replays it (core/step_graph.h): the host then launches one
// graph per step, so the time is the GPU's alone; there are no phase clocks (the split
// prints as 0) and step_ms is the wall time per replay. --checkpoint-activations
// recomputes each block's forward in backward (memory.activation_peak shows what it
// saves); the FLOPs above leave the recomputation out, as MFU does. --flash-tiles sets the
// fused attention kernels' tile shapes (zt-bench attention times each one), --flash-backward
// their backward's way to dq (split, or atomic: one pass and f32 atomics, flash_shapes.h).
// Each step is reported on stderr as it ends (its time and about how long the rest takes),
// stdout holding the JSON alone: GPT-2 small's shape takes a minute or so a step on a few
// CPU cores.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "apps/bench/bench.h"
#include "apps/common/cli_checks.h"
#include "apps/common/progress.h"
#include "apps/common/train_util.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "core/cuda/flash_params.h"
#include "core/cuda/flash_shapes.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/plural.h"
#include "core/step_graph.h"
#include "zero/zero.h"

namespace {

using namespace zt;

// A smaller shape than GPT-2 small's, for a measurement on the CPU that takes seconds.
constexpr const char* kCpuShape = "--layers 4 --width 256 --heads 4 --seq 256 --vocab 4096";

// The run's steps on stderr as they end: "zt-bench gpt: step 2/5 (timed) 61.3s, about 3m04s
// left" (the step's time, "412ms" under a second; the rest at the mean step so far). Said
// for the first and the last step, and for others a second or more after the line before:
// a run of small steps prints a few lines, not thousands. Silent when `on` is false (ranks
// but the first).
class StepNotes {
 public:
  StepNotes(bool on, int total)
      : on_(on), total_(total), start_(Clock::now()), said_(start_), last_(start_) {}
  /// `n` more steps of kind `kind` (warm-up, timed, ...) have ended.
  void done(const char* kind, int n = 1) {
    const auto now = Clock::now();
    const double took = std::chrono::duration<double>(now - last_).count() / n;
    last_ = now;
    done_ += n;
    if (!on_ || (done_ > n && done_ < total_ && now - said_ < std::chrono::seconds(1))) return;
    said_ = now;
    const double mean = std::chrono::duration<double>(now - start_).count() / done_;
    std::string left;
    if (done_ < total_)
      left = ", about " + zt::app::format_duration(mean * (total_ - done_)) + " left";
    char time[32];
    std::snprintf(time, sizeof time, took < 1 ? "%.0fms" : "%.1fs", took < 1 ? 1e3 * took : took);
    std::fprintf(stderr, "zt-bench gpt: step %d/%d (%s) %s%s\n", done_, total_, kind, time,
                 left.c_str());
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  int total_, done_ = 0;
  Clock::time_point start_, said_, last_;
};

}  // namespace

ZT_BENCH(gpt, "GPT training step on random tokens: tokens/s, step split, memory, MFU") {
  bench::Cli app("gpt");
  gpt::GptSpec spec;
  spec.vocab_size = 50304;
  spec.block_size = 1024;
  spec.n_layer = 12;
  spec.n_head = 12;
  spec.n_embd = 768;
  spec.fused_qkv = true;  // GPT-2's c_attn (tools/bench_gpt_torch.py builds the same)
  std::string qkv = "fused";
  int batch = 4, steps = 3, ranks = 1, threads = 0;
  double peak_tflops = -1;
  bool offload = false, kernels = false, graphed = false, recompute = false;
  std::string device_name = "cpu", dtype = "f32",
              attention = attention_kernel_name(attention_kernel()), flash_tiles,
              flash_backward = flash::backward_name(flash::backward());
  app.add_option("--layers", spec.n_layer, "transformer blocks")->check(zt::app::whole_number(1));
  app.add_option("--width", spec.n_embd, "embedding width (a multiple of --heads)")
      ->check(zt::app::whole_number(1));
  app.add_option("--heads", spec.n_head, "attention heads")->check(zt::app::whole_number(1));
  app.add_option("--seq", spec.block_size, "context length (tokens per sequence)")
      ->check(zt::app::whole_number(1));
  app.add_option("--vocab", spec.vocab_size, "vocabulary size")->check(zt::app::whole_number(1));
  app.add_option("--batch", batch, "sequences per step per rank")->check(zt::app::whole_number(1));
  app.add_option("--steps", steps, "timed steps (after one warm-up step)")
      ->check(zt::app::whole_number(1));
  app.add_option("--ranks", ranks, "thread ranks (CPU only)")->check(zt::app::whole_number(1));
  app.add_option("--threads", threads, "kernel threads per rank (0: the process's count / ranks)")
      ->check(zt::app::whole_number(0));
  app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", dtype, "parameter and compute dtype: f32, or bf16 with fp32 masters")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_flag("--offload", offload,
               "fp32 masters and AdamW state in pinned host memory, updated there "
               "(offload_optimizer)");
  app.add_flag("--tie-embeddings", spec.tie_embeddings,
               "one matrix for the token table and the output head (GPT-2's 124M parameters "
               "at the default sizes)");
  app.add_option("--qkv", qkv,
                 "fused: one q/k/v projection per block, as GPT-2's c_attn; separate: three")
      ->check(CLI::IsMember({"fused", "separate"}));
  app.add_flag("--checkpoint-activations", recompute,
               "keep no activations inside each block from forward to backward (recomputed)");
  app.add_flag("--kernels", kernels,
               "then run --steps more steps under a kernel profile and print each kernel's "
               "time per step");
  app.add_option("--attention", attention,
                 "attention kernels: auto (fused on a GPU for bf16), flash (fused wherever "
                 "supported; on the CPU a slow emulation) or math (batched GEMMs and softmax)")
      ->check(CLI::IsMember({"auto", "flash", "math"}));
  app.add_option("--flash-tiles", flash_tiles,
                 "the fused attention kernels' tile shapes, FORWARD[,BACKWARD] as rows per warp "
                 "x rows per step [x pipeline stages] (e.g. 32x64,16x32x3; zt-bench attention "
                 "lists and times them); "
                 "default: each head dim's default");
  app.add_option("--flash-backward", flash_backward,
                 "the fused attention backward's way to dq: split (a dq pass, then dk / dv; "
                 "the same bits every run) or atomic (one pass, dq's shares added in f32 by "
                 "atomics; fewer products)")
      ->check(CLI::IsMember({"split", "atomic"}));
  app.add_flag("--cuda-graph", graphed,
               "capture the step as a CUDA graph after 2 warm-up steps and replay it (cuda, "
               "one rank; no --offload or --kernels)");
  app.add_option("--peak-tflops", peak_tflops,
                 "the device's dense peak for --dtype, for MFU (default: H200's on cuda)");
  app.add_gpu_math_options();  // --tf32 for f32 on a GPU; --gemm-benchmark
  app.footer(std::string("Each step is reported on stderr as it ends; stdout holds the JSON "
                         "alone. The default shape, GPT-2 small's, is a GPU's: on a few CPU "
                         "cores each of its steps takes a minute or so (and the run takes a "
                         "warm-up step, the --steps and one more); for a CPU measurement in "
                         "seconds try ") +
             kCpuShape);
  if (int rc = 0; !app.parse_args(args, &rc)) return rc;
  const Device device = Device::parse(device_name);
  spec.fused_qkv = qkv == "fused";
  if (const std::string why = device.is_cuda() ? zt::app::cuda_missing() : ""; !why.empty()) {
    std::fprintf(stderr, "zt-bench gpt: --device cuda %s\n", why.c_str());
    return 1;
  }
  if (device.is_cuda() && ranks != 1) {
    std::fprintf(stderr,
                 "zt-bench gpt: --device cuda runs one rank (thread ranks exchange host "
                 "memory): use --ranks 1\n");
    return 1;
  }
  if (graphed && (!device.is_cuda() || offload || kernels)) {
    std::fprintf(stderr,
                 "zt-bench gpt: --cuda-graph needs --device cuda, and no --offload (the host "
                 "update cannot be captured) or --kernels\n");
    return 1;
  }
  if (spec.n_embd % spec.n_head != 0) {
    std::fprintf(stderr, "zt-bench gpt: --width %lld is not a multiple of --heads %lld\n",
                 static_cast<long long>(spec.n_embd), static_cast<long long>(spec.n_head));
    return 1;
  }
  set_attention_kernel(parse_attention_kernel(attention));
  flash::set_backward(flash::parse_backward(flash_backward));
  if (!flash_tiles.empty()) {
    // Checked against the head dim's built shapes here: a shape the kernels lack would
    // otherwise fail only at their first call, or never where they do not run (f32, math).
    const int64_t head_dim = spec.n_embd / spec.n_head;
    if (!flash::head_dim_supported(head_dim)) {
      std::fprintf(stderr,
                   "zt-bench gpt: --flash-tiles: head dim %lld has no fused attention kernels "
                   "(they take 32, 64, 96 and 128: --width / --heads)\n",
                   static_cast<long long>(head_dim));
      return 1;
    }
    const size_t comma = flash_tiles.find(',');
    try {
      auto set = [&](const std::string& text, const char* which,
                     std::initializer_list<flash::Pass> passes) {
        const flash::TileShape s = flash::parse_tile_shape(text);
        const std::vector<flash::TileShape> built = flash::tile_shapes(*passes.begin(), head_dim);
        ZT_CHECK(std::find(built.begin(), built.end(), s) != built.end(), s.str(),
                 " is not built for head dim ", head_dim, which,
                 " (built: ", flash::tile_shapes_str(*passes.begin(), head_dim), ")");
        for (flash::Pass p : passes) flash::set_tile_shape(p, s);
      };
      set(flash_tiles.substr(0, comma), "", {flash::Pass::forward});
      if (comma != std::string::npos)
        set(flash_tiles.substr(comma + 1), "'s backward", {flash::Pass::dq, flash::Pass::dkdv});
    } catch (const Error& e) {
      std::fprintf(stderr, "zt-bench gpt: --flash-tiles: %s\n", e.what());
      return 1;
    }
  }
  if (app.count("--peak-tflops") && !(std::isfinite(peak_tflops) && peak_tflops > 0)) {
    std::fprintf(stderr, "zt-bench gpt: --peak-tflops must be a finite number above 0, got %g\n",
                 peak_tflops);
    return 1;
  }
  // f32 under --tf32 all multiplies on TF32 tensor cores: their peak, not plain f32's.
  if (peak_tflops < 0)
    peak_tflops = !device.is_cuda() ? 0.0 : dtype == "bf16" ? 989.0 : tf32().matmul ? 494.7 : 67.0;

  // The steps the run takes: the warm-up (with --cuda-graph 2 and the capture), the timed
  // ones, the one the work counts are taken from, and --kernels' profiled ones.
  const int warmups = graphed ? 3 : 1, all_steps = warmups + steps + 1 + (kernels ? steps : 0);
  const bool default_shape = app.count("--layers") + app.count("--width") + app.count("--heads") +
                                 app.count("--seq") + app.count("--vocab") ==
                             0;
  const std::string on = ranks > 1 ? counted(ranks, "thread rank") : device.str();
  std::fprintf(stderr,
               "zt-bench gpt: %s, width %lld, %s, context %lld, vocabulary %lld (%.3gM "
               "parameters), batch %d on %s, %s: %s\n",
               counted(spec.n_layer, "layer").c_str(), static_cast<long long>(spec.n_embd),
               counted(spec.n_head, "head").c_str(), static_cast<long long>(spec.block_size),
               static_cast<long long>(spec.vocab_size),
               static_cast<double>(spec.count_parameters()) / 1e6, batch, on.c_str(), dtype.c_str(),
               counted(all_steps, "step").c_str());
  if (!device.is_cuda() && default_shape)
    std::fprintf(stderr,
                 "zt-bench gpt: note: GPT-2 small's shape takes a minute or so a step on a "
                 "few CPU cores; for a measurement in seconds try %s\n",
                 kCpuShape);

  comm::run_threads(ranks, [&](comm::Communicator& comm) {
    if (threads > 0) set_num_threads(threads);  // else its share of the process's count
    manual_seed(1);
    std::shared_ptr<gpt::Gpt> model = vqgpt::build_gpt(spec, comm, device);
    for (const auto& [name, block] : model->blocks->named_children())
      block->set_checkpointing(recompute);
    zero::Config cfg;
    cfg.precision.bf16 = dtype == "bf16";
    if (offload) cfg.offload_optimizer = {zero::OffloadDevice::kCpu, /*pin_memory=*/true};
    zero::Engine engine(model, comm, cfg, {.type = "adamw", .lr = 1e-4});
    // The peaks printed are training's: building the model (one module gathered at a time
    // for its initialization) is not counted.
    reset_peak_memory();
    Generator g(7 + comm.rank());
    const Tensor ids = randint(0, spec.vocab_size, {batch, spec.block_size + 1}, g).to(device);
    const Tensor inputs = ids.narrow(1, 0, spec.block_size).contiguous();
    const Tensor targets = ids.narrow(1, 1, spec.block_size).contiguous();

    using Clock = std::chrono::steady_clock;
    StepNotes notes(comm.rank() == 0, all_steps);
    auto at = [&](const Tensor& last) {
      bench::sync(last);
      return Clock::now();
    };
    auto ms = [](Clock::time_point a, Clock::time_point b) {
      return 1e3 * std::chrono::duration<double>(b - a).count();
    };
    std::vector<double> fwd, bwd, opt, total;
    double loss = 0;
    auto step = [&] {
      Tensor logits = engine(inputs);
      Tensor l = cross_entropy(logits.reshape({-1, spec.vocab_size}), targets.reshape({-1}));
      engine.backward(l);
      engine.step();
      return std::vector<Tensor>{l};
    };
    std::unique_ptr<StepGraph> graph;
    if (graphed) {  // 2 warm-up steps, the capture, then the timed replays
      engine.set_capturable(true);
      graph = std::make_unique<StepGraph>(device);
      for (int i = 0; i < 3 + steps; ++i) {
        const auto t0 = Clock::now();
        loss = graph->run(step, [&] { engine.before_replay(); })[0].item();
        if (i >= 3) total.push_back(ms(t0, Clock::now()));
        notes.done(i < 2 ? "warm-up" : i == 2 ? "capture" : "timed");
      }
    }
    for (int i = 0; i <= (graphed ? -1 : steps); ++i) {
      comm.barrier();
      const auto t0 = Clock::now();
      Tensor logits = engine(inputs);
      Tensor l = cross_entropy(logits.reshape({-1, spec.vocab_size}), targets.reshape({-1}));
      const auto t1 = at(l);
      engine.backward(l);
      const auto t2 = at(l);
      engine.step();
      // The loss, not a parameter: the step has released every non-persistent one.
      const auto t3 = at(l);
      loss = l.item();
      notes.done(i == 0 ? "warm-up" : "timed");
      if (i == 0) continue;  // warm-up: records the trace, allocates the caches
      fwd.push_back(ms(t0, t1));
      bwd.push_back(ms(t1, t2));
      opt.push_back(ms(t2, t3));
      total.push_back(ms(t0, t3));
    }
    // The work of one more step, without the phase clocks' synchronizations.
    const std::string work = bench::work_per_call_json([&] {
      if (graph)
        graph->run(step, [&] { engine.before_replay(); });
      else
        step();
    });
    notes.done("work counts");
    const std::string profile = kernels ? bench::kernel_profile_json("gpt", steps, step) : "";
    if (kernels) notes.done("kernel profile", steps);
    if (comm.rank() != 0) return;
    const double n = static_cast<double>(spec.count_parameters());
    // The parameters that multiply: all but the token and position tables (lookups; a
    // tied token table multiplies as the head).
    const double n_matmul =
        n - static_cast<double>((spec.block_size + (spec.tie_embeddings ? 0 : spec.vocab_size)) *
                                spec.n_embd);
    const double tokens = static_cast<double>(batch) * static_cast<double>(spec.block_size) *
                          static_cast<double>(comm.size());
    const double flops = (6.0 * n_matmul + 12.0 * static_cast<double>(spec.n_layer * spec.n_embd) *
                                               static_cast<double>(spec.block_size)) *
                         tokens;
    const double step_s = bench::median(total) / 1e3;
    const double tflops = flops / step_s / 1e12;
    // The fused kernels' shapes at this head dim, forward then backward ("none": a head dim
    // they are not built for).
    const int64_t head_dim = spec.n_embd / spec.n_head;
    const std::string tiles = flash::head_dim_supported(head_dim)
                                  ? flash::tile_shape(flash::Pass::forward, head_dim).str() + "," +
                                        flash::tile_shape(flash::Pass::dq, head_dim).str()
                                  : "none";
    char mfu[32] = "null";
    if (peak_tflops > 0) std::snprintf(mfu, sizeof mfu, "%.4g", tflops / peak_tflops);
    std::printf(
        "{\"bench\":\"gpt\",\"device\":\"%s\",\"dtype\":\"%s\",\"attention\":\"%s\","
        "\"attention_fused\":%s,\"flash_"
        "tiles\":\"%s\",\"flash_backward\":\"%s\","
        "\"qkv\":\"%s\",%s,\"cuda_graph\":%s,\"offload\":%s,\"activation_checkpointing\":%s,"
        "\"tied\":%"
        "s,"
        "\"ranks\":%d,"
        "\"layers\":%lld,"
        "\"width\":%lld,\"heads\":%lld,\"seq\":%lld,\"vocab\":%lld,\"batch_per_rank\":%d,"
        "\"params\":%.0f,\"matmul_params\":%.0f,\"tokens_per_step\":%.0f,\"forward_ms\":%.2f,"
        "\"backward_ms\":%.2f,"
        "\"optimizer_ms\":%.2f,\"step_ms\":%.2f,\"tokens_per_s\":%.1f,\"tflops\":%.4f,"
        "\"peak_tflops\":%.1f,\"mfu\":%s,\"loss\":%.4f,%s,\"memory\":%s}\n",
        device.str().c_str(), dtype.c_str(), attention.c_str(),
        zt::fused_attention_applies(device, dtype == "bf16" ? zt::DType::bf16 : zt::DType::f32,
                                    head_dim)
            ? "true"
            : "false",
        tiles.c_str(), flash::backward_name(flash::backward()), qkv.c_str(),
        bench::gpu_math_json().c_str(), graphed ? "true" : "false", offload ? "true" : "false",
        recompute ? "true" : "false", spec.tie_embeddings ? "true" : "false", comm.size(),
        static_cast<long long>(spec.n_layer), static_cast<long long>(spec.n_embd),
        static_cast<long long>(spec.n_head), static_cast<long long>(spec.block_size),
        static_cast<long long>(spec.vocab_size), batch, n, n_matmul, tokens, bench::median(fwd),
        bench::median(bwd), bench::median(opt), 1e3 * step_s, tokens / step_s, tflops, peak_tflops,
        mfu, loss, work.c_str(), engine.memory_report().json().c_str());
    std::fputs(profile.c_str(), stdout);
    std::fflush(stdout);
  });
  return 0;
}
