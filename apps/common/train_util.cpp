// Shared app helpers: engine and learning-rate construction from an AppConfig, and a run's
// checkpoints and notes.
#include "apps/common/train_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numbers>

#include "apps/common/host_memory.h"
#include "apps/common/output_paths.h"
#include "apps/common/run_checks.h"
#include "configs/deepspeed.h"
#include "core/algo_policy.h"
#include "core/cuda/flash_shapes.h"
#include "core/ops.h"
#include "core/plural.h"
#include "core/text_file.h"
#include "data/factory.h"
#include "zero/checkpoint.h"

namespace zt::app {

TrainData make_train_data(const config::AppConfig& cfg, comm::Communicator& comm, const char* app) {
  const int64_t world = comm.size();
  TrainData d;
  // Each rank lists the folders; the ranks split the reading of the files' headers.
  const data::Headers split = data::Headers::left_to_caller;
  d.dataset = data::make_dataset(cfg.data, /*eval=*/false, 0, split);
  check_same_data(*d.dataset, comm, app);
  check_image_headers(*d.dataset, comm, "data.path");
  d.loader = data::make_loader(d.dataset, cfg.data, cfg.train.batch, comm.rank(), world);
  if (cfg.train.eval_every > 0) {
    ZT_CHECK(cfg.data.eval_samples > 0, app,
             ": the eval split is empty: data.eval_samples is 0 but train.eval_every is ",
             cfg.train.eval_every,
             ", and evaluation needs items; set data.eval_samples, or train.eval_every: 0 to "
             "evaluate never");
    d.eval_set = data::make_eval_dataset(cfg.data, d.dataset, scored_eval_items(cfg, world), split);
    check_same_data(*d.eval_set, comm, app);
    if (!cfg.data.eval_path.empty()) check_image_headers(*d.eval_set, comm, "data.eval_path");
  }
  return d;
}

namespace fs = std::filesystem;

// ---- engine construction

zero::OptimizerConfig optimizer_config(const config::TrainConfig& train) {
  zero::OptimizerConfig o;
  o.type =
      config::optimizer_name(train.optimizer);  // zero::OptimizerConfig's names are the config's
  o.lr = train.lr;
  o.beta1 = train.betas[0];
  o.beta2 = train.betas[1];
  o.eps = train.eps;
  o.weight_decay = train.weight_decay;
  o.weight_decay_1d = train.weight_decay_1d;
  o.no_weight_decay = train.no_weight_decay;
  o.param_groups = train.param_groups;
  o.momentum = train.momentum;
  o.dampening = train.dampening;
  // SGD's alone: left in a config whose optimizer became adam or adamw (by --set, or a
  // DeepSpeed JSON's), it is a warning there (note_inapplicable), not an error here.
  o.nesterov = train.optimizer == config::Optimizer::sgd && train.nesterov;
  return o;
}

namespace {

// Mixed precision at the edges of the model's parts: a module whose parameters are stored
// in `low` computes in it, while floating tensors enter and leave it in f32. So the code
// between parts (losses, the glue of a model's forward, a replicated f32 part such as a
// frozen tokenizer) never meets a 16-bit tensor, and gradients flow back through the casts.
void compute_in(nn::Module& m, DType low) {
  m.add_forward_pre_hook([low](nn::Module&, std::vector<Tensor>& inputs) {
    for (Tensor& t : inputs)
      if (t.defined() && t.dtype() == DType::f32) t = t.to(low);
  });
  m.add_forward_hook([low](nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>& outputs) {
    for (Tensor& t : outputs)
      if (t.defined() && t.dtype() == low) t = t.to(DType::f32);
  });
}

bool stores_in(const nn::Module& m, DType low, bool recurse) {
  for (const auto& [name, p] : m.named_parameters(recurse))
    if (p.dtype() == low) return true;
  return false;
}

// The parts are the top-level submodules holding low-precision parameters (or the whole
// model when it holds such parameters itself).
void cast_at_part_edges(nn::Module& model, DType low) {
  if (stores_in(model, low, /*recurse=*/false)) {
    compute_in(model, low);
    return;
  }
  for (const auto& [name, child] : model.named_children())
    if (stores_in(*child, low, /*recurse=*/true)) compute_in(*child, low);
}

// Each message once per process (several engines may be built from one config).
}  // namespace

void apply_replicated(nn::Module& model, const std::vector<std::string>& paths,
                      comm::Communicator& comm) {
  for (const std::string& path : paths) {
    std::shared_ptr<nn::Module> sub = model.find(path);
    if (!sub) {
      std::string known;
      for (const auto& [name, m] : model.named_children())
        known += (known.empty() ? "" : ", ") + name;
      ZT_CHECK(false, "replicated: no module '", path, "' in the model; top-level modules: ", known,
               " (use dotted paths such as 'encoder.down.0')");
    }
    zero::replicate(*sub, comm);
  }
}

int64_t checkpoint_activations(nn::Module& model, const config::TrainConfig& train,
                               const std::vector<std::string>& block_types) {
  if (!train.activation_checkpointing) return 0;
  int64_t n = 0;
  for (const auto& [path, m] : model.named_modules())
    if (std::find(block_types.begin(), block_types.end(), m->type_name()) != block_types.end()) {
      m->set_checkpointing(true);
      ++n;
    }
  ZT_CHECK(n > 0, "train.activation_checkpointing: the model has no block to checkpoint");
  return n;
}

std::unique_ptr<zero::Engine> make_engine(std::shared_ptr<nn::Module> model,
                                          const config::AppConfig& cfg, comm::Communicator& comm,
                                          EngineUse use, bool quiet) {
  warn_config(cfg.warnings, comm);
  if (use != EngineUse::reading_weights) {
    warn_config(cfg.training_warnings, comm);
    config::check_world_size(cfg, comm.size());  // DeepSpeed's train_batch_size
  }
  apply_replicated(*model, cfg.replicated, comm);
  nn::Module& m = *model;
  zero::Config zero_config = cfg.zero;
  zero_config.quiet = quiet;
  auto engine = std::make_unique<zero::Engine>(std::move(model), comm, std::move(zero_config),
                                               optimizer_config(cfg.train));
  const DType low = cfg.zero.precision.dtype();
  if (low != DType::f32) cast_at_part_edges(m, low);
  if (use != EngineUse::reading_weights) {
    const zero::MemoryPlan plan =
        zero::plan_memory(m, comm.size(), engine->config(), optimizer_states(cfg.train));
    check_host_fits(host_bytes_to_come(plan, engine->device()),
                    "the predicted model states, gathered parameters and replicas", comm);
  }
  if (use == EngineUse::training && !cfg.train.trace.empty())
    engine->set_timeline(cfg.train.trace, cfg.train.trace_steps);
  return engine;
}

std::unique_ptr<StepGraph> make_step_graph(const config::TrainConfig& train, zero::Engine& engine,
                                           Device device, double dropout, const char* dropout_key,
                                           const char* app) {
  if (!train.cuda_graph) return nullptr;
  const std::string why = engine.capture_blocker();
  ZT_CHECK(why.empty(), app, ": train.cuda_graph: the step cannot be captured: ", why);
  ZT_CHECK(dropout == 0, app, ": train.cuda_graph: ", dropout_key, " is ", dropout,
           "; random draws cannot be replayed (set it to 0)");
  engine.set_capturable(true);
  return std::make_unique<StepGraph>(device);
}

std::string cuda_missing() {
#ifndef ZT_WITH_CUDA
  return "needs a CUDA build; rebuild with -DZT_CUDA=ON";
#else
  return cuda_available() ? "" : "but no GPU is visible; check nvidia-smi and CUDA_VISIBLE_DEVICES";
#endif
}

Device train_device(const config::TrainConfig& train, const comm::Communicator& comm,
                    const char* app) {
  if (!train.attention.empty()) set_attention_kernel(parse_attention_kernel(train.attention));
  if (!train.flash_backward.empty())
    flash::set_backward(flash::parse_backward(train.flash_backward));
  if (train.gemm_benchmark) set_gemm_benchmark(*train.gemm_benchmark);  // CUDA GEMMs only
  if (train.device == "cpu") return Device::cpu();
  ZT_CHECK(train.device == "cuda", app, ": train.device must be cpu or cuda, got '", train.device,
           "'");
  if (const std::string why = cuda_missing(); !why.empty()) {
    ZT_FAIL(app, ": train.device 'cuda' ", why, ", or set train.device=cpu");
  }
  set_tf32({.matmul = train.tf32 == "all", .conv = train.tf32 != "none"});
  set_conv_algo_policy({.benchmark = train.cudnn_benchmark.value_or(conv_algo_policy().benchmark),
                        .deterministic = train.cudnn_deterministic});
  if (comm.device().is_cuda()) return comm.device();  // NCCL: this process's GPU
  ZT_CHECK(comm.size() == 1, app, ": train.device 'cuda' with ", comm.size(),
           " thread ranks; thread ranks exchange host memory, so on GPUs run one rank per "
           "process: mpirun -np N ... (NCCL, one GPU each), or --ranks 1");
  return Device::cuda(0);
}

namespace {
// Runs `collective` on host tensor t, through a copy on the communicator's GPU when it has
// one (NCCL exchanges device memory).
template <typename Collective>
void on_host(comm::Communicator& comm, Tensor& t, Collective collective) {
  if (!comm.device().is_cuda()) {
    collective(t);
    return;
  }
  Tensor d = t.to(comm.device());
  collective(d);
  t.copy_(d.to(Device::cpu()));
}
}  // namespace

void all_reduce_host(comm::Communicator& comm, Tensor& t, comm::ReduceOp op) {
  on_host(comm, t, [&](Tensor& x) { comm.all_reduce(x, op); });
}

void broadcast_host(comm::Communicator& comm, Tensor& t, int root) {
  on_host(comm, t, [&](Tensor& x) { comm.broadcast(x, root); });
}

// ---- learning rate

namespace {
// Warmup longer than the run (a short run of a long config) is cut to the run.
int64_t warmup_of(const config::TrainConfig& t) {
  return std::min(t.warmup, t.steps);
}

optim::LrSchedule base_schedule(const config::TrainConfig& t) {
  switch (t.schedule) {
    case config::Schedule::cosine:
      return optim::LrSchedule::warmup_cosine(t.lr, warmup_of(t), t.steps, t.min_lr);
    case config::Schedule::step:
      return optim::LrSchedule::step(t.lr, t.step_size, t.gamma);
    default:
      return optim::LrSchedule::constant(t.lr);
  }
}
}  // namespace

LrPlan::LrPlan(const config::TrainConfig& train)
    : kind_(train.schedule),
      deepspeed_(train.deepspeed_schedule),
      base_(train.lr),
      min_lr_(train.min_lr),
      warmup_(warmup_of(train)),
      total_(train.steps),
      deepspeed_warmup_(train.warmup),
      schedule_(base_schedule(train)) {}

double LrPlan::lr_at(int64_t step) const {
  if (deepspeed_) return deepspeed_lr_at(step);
  if (kind_ == config::Schedule::cosine) return schedule_.lr_at(step);  // has its own warmup
  if (step < warmup_) return base_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if (kind_ == config::Schedule::linear) {
    const int64_t span = std::max<int64_t>(1, total_ - warmup_);
    const double frac =
        std::min(1.0, static_cast<double>(step - warmup_) / static_cast<double>(span));
    return base_ + (min_lr_ - base_) * frac;
  }
  if (kind_ == config::Schedule::step) return schedule_.lr_at(step - warmup_);
  return base_;
}

// DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR (linear warmup from 0), as they
// step: the scheduler starts at the warmup's start, and steps after each update, so update
// u >= 1 runs at iteration k = u - 1; the warmup lasts at least 2 iterations.
double LrPlan::deepspeed_lr_at(int64_t step) const {
  if (step == 0) return 0.0;
  const auto k = static_cast<double>(step - 1);
  const auto w = static_cast<double>(std::max<int64_t>(2, deepspeed_warmup_));
  const double after = std::max(1.0, static_cast<double>(total_) - w);
  if (k < w) return base_ * k / w;
  if (kind_ == config::Schedule::linear)
    return min_lr_ + (base_ - min_lr_) * std::max(0.0, (static_cast<double>(total_) - k) / after);
  if (kind_ == config::Schedule::cosine)
    return min_lr_ +
           (base_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * (k - w + 1.0) / after));
  return base_;
}

// ---- runs

std::string epoch_note(int64_t batch, int64_t world, int64_t accumulation, int64_t dataset_size,
                       bool shuffle) {
  const int64_t per_step = batch * world * accumulation;
  std::string note;
  if (per_step > dataset_size)
    note = detail::cat("one step reads ", counted(per_step, "clip"), " (train.batch ", batch, " x ",
                       counted(world, "rank"), " x ", accumulation,
                       " train.gradient_accumulation_steps), more than the training data's ",
                       dataset_size, ": every step spans more than an epoch");
  // Each rank reads whole batches of an equal part of the data (data::DistributedSampler,
  // data::DataLoader): the rest of an epoch is left out, shuffled a new part every epoch.
  const int64_t left = dataset_size - dataset_size / world / batch * batch * world;
  if (shuffle || left == 0) return note;
  return detail::cat(note, note.empty() ? "" : "; ",
                     "data.shuffle is false: every epoch reads the data in order and leaves out "
                     "the same last ",
                     left, " of its ", dataset_size, " clips (past whole batches of ", batch,
                     " on each of ", counted(world, "rank"),
                     "), which are never trained on; shuffle, or use data of a multiple of ",
                     batch * world, " clips");
}

void export_engine(zero::Engine& engine, const std::string& out, comm::Communicator& comm) {
  ZT_CHECK(!out.empty(), "export: pass --out with the .safetensors file to write");
  if (comm.rank() == 0) make_parent_folders(out);
  comm.barrier();
  zero::export_consolidated(engine, out);
}

std::string save_training_checkpoint(zero::Engine& engine, const std::string& root, int64_t step,
                                     const config::AppConfig& cfg, const data::DataLoader& loader,
                                     const std::string& app_name,
                                     std::vector<std::pair<std::string, Tensor>> state) {
  const data::LoaderState pos = loader.state();
  zero::CheckpointExtra extra;
  extra.step = step;
  extra.config_yaml = cfg.root.dump();
  // A DeepSpeed JSON sets much of the run (config_yaml holds only its path): kept as the
  // run read it at the start, so that a resume compares the settings it gave, not the file
  // as it is then (edited, or gone).
  if (!cfg.deepspeed_config.empty()) extra.user["deepspeed_json"] = cfg.deepspeed_json;
  extra.loader_epoch = pos.epoch;
  extra.loader_position = pos.position;
  extra.loader_batch = loader.options().batch_size;
  extra.loader_dataset_size = loader.sampler().dataset_size();
  extra.user["app"] = app_name;
  extra.state = std::move(state);
  extra.state.emplace_back("rng_state", gather_rng_state(engine.comm()));
  return zero::save_checkpoint(engine, root, zero::checkpoint_tag(step), extra,
                               cfg.train.keep_checkpoints);
}

}  // namespace zt::app
