// Helpers shared by the training apps (vqtok, vqgpt): building the ZeRO-3 engine and the
// learning-rate plan from an AppConfig, and a run's checkpoints and notes. It includes the
// other pieces a training loop uses: window statistics (window_stats.h), the metrics file
// (metrics.h), the progress display (progress.h), the random streams (rng_state.h) and
// the data position on resume (resume_data.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/common/metrics.h"
#include "apps/common/progress.h"
#include "apps/common/resume_data.h"
#include "apps/common/rng_state.h"
#include "apps/common/window_stats.h"
#include "configs/app_config.h"
#include "core/step_graph.h"
#include "data/loader.h"
#include "optim/schedule.h"
#include "zero/checkpoint.h"
#include "zero/zero.h"

namespace zt::app {

/// batches x batch x world, the clips that many batches on every rank read, at most 2^63 - 1
/// (a data set holds fewer items than any product that large).
inline int64_t clips_of(int64_t batches, int64_t batch, int64_t world) {
  const __int128 n = static_cast<__int128>(batches) * batch * world;
  return static_cast<int64_t>(std::min<__int128>(n, std::numeric_limits<int64_t>::max()));
}

/// How many eval items a training run's evaluation reads: train.eval_batches x batch x
/// `world` (0: all, when eval_batches is 0).
inline int64_t scored_eval_items(const config::AppConfig& cfg, int64_t world) {
  return clips_of(cfg.train.eval_batches, cfg.train.batch, world);
}

/// A training run's data, each data set checked to be the same on every rank: the
/// training set, this rank's loader over it, and the eval set (null unless
/// train.eval_every > 0). Built before the model, so that a data set too small for the
/// ranks fails before every rank builds one.
struct TrainData {
  std::shared_ptr<const data::Dataset> dataset, eval_set;
  std::unique_ptr<data::DataLoader> loader;
};
TrainData make_train_data(const config::AppConfig& cfg, comm::Communicator& comm, const char* app);

// ---- engine construction

/// The optimizer settings of cfg.train (type, lr, betas, eps, weight decay, momentum).
zero::OptimizerConfig optimizer_config(const config::TrainConfig& train);
/// Turns each module path of cfg.replicated into a full replica (error naming an unknown
/// path and listing the top-level modules).
void apply_replicated(nn::Module& model, const std::vector<std::string>& paths,
                      comm::Communicator& comm);
/// With train.activation_checkpointing, every module of `model` whose type is one of
/// `block_types` keeps no activations from forward to backward (recomputed in backward,
/// nn::Module::set_checkpointing); an error if none is. Returns how many.
int64_t checkpoint_activations(nn::Module& model, const config::TrainConfig& train,
                               const std::vector<std::string>& block_types);
/// fp32 values per trainable element the configured optimizer keeps (zero::plan_memory's
/// optimizer_states): 2 for Adam and AdamW, 1 for SGD with momentum, 0 for plain SGD.
inline int optimizer_states(const config::TrainConfig& t) {
  return t.optimizer != config::Optimizer::sgd ? 2 : t.momentum != 0 ? 1 : 0;
}
/// What an engine is built for. Only a run that trains (train, and plan, which measures
/// training steps) is held to DeepSpeed's train_batch_size at this world size and records
/// train.trace's timeline; one that reads weights (export, encode, eval, decode, sample,
/// a frozen tokenizer) is held to neither.
/// training: a run; planning: `plan`'s measured steps, as training but writing nothing
/// (no timeline); reading_weights: an engine built only to read or run weights.
enum class EngineUse { training, planning, reading_weights };
/// An engine over `model` (built under zero::Init) with cfg's ZeRO and optimizer settings.
/// With bf16 / f16 each top-level submodule holding partitioned parameters computes in
/// that dtype while tensors enter and leave it in f32 (so losses and replicated f32 parts
/// are unchanged). Prints cfg.warnings once on rank 0. For training and planning, also
/// cfg.training_warnings, and checks a DeepSpeed train_batch_size against the world size;
/// for training, records a timeline when train.trace is set. For both, an error on every
/// rank when the predicted host bytes still to come (app::host_bytes_to_come) do not fit
/// the host (app::check_host_fits), before any step allocates them. `quiet` (a run's quiet
/// option): the engine prints none of its notes (zero::Config::quiet: fp16 overflows, the
/// offload, the timeline).
std::unique_ptr<zero::Engine> make_engine(std::shared_ptr<nn::Module> model,
                                          const config::AppConfig& cfg, comm::Communicator& comm,
                                          EngineUse use, bool quiet = false);
/// Why a GPU cannot be used here ("" when it can), to follow "<what> 'cuda' ": the build
/// has no CUDA, or no GPU is visible.
std::string cuda_missing();
/// The device training runs on, from train.device: cpu, or the GPU of this rank. "cuda"
/// needs a CUDA build and a visible GPU, and one rank per process: NCCL under mpirun (the
/// GPU of the local rank) or a single thread rank (thread ranks exchange host memory).
/// It applies train.attention (set_attention_kernel), train.flash_backward and
/// train.gemm_benchmark (set_gemm_benchmark, core/algo_policy.h) and, on a GPU, train.tf32
/// (set_tf32) and train.cudnn_benchmark / cudnn_deterministic (set_conv_algo_policy).
/// Errors name `app` and the fix.
Device train_device(const config::TrainConfig& train, const comm::Communicator& comm,
                    const char* app);
/// train.cuda_graph: null when off; else the step graph, after checking that the step can
/// be captured (the engine's blockers; `dropout`, named `dropout_key`, must be 0 since
/// random draws cannot be replayed) and putting the engine in capturable mode.
std::unique_ptr<StepGraph> make_step_graph(const config::TrainConfig& train, zero::Engine& engine,
                                           Device device, double dropout, const char* dropout_key,
                                           const char* app);
/// all_reduce of a host tensor t on any communicator: through the communicator's device
/// when it is a GPU (NCCL reduces device memory), in place otherwise.
void all_reduce_host(comm::Communicator& comm, Tensor& t, comm::ReduceOp op);
/// broadcast of a host tensor t from `root`, the same way.
void broadcast_host(comm::Communicator& comm, Tensor& t, int root);

// ---- learning rate

/// The learning rate of update `step` (0-based): linear warmup over train.warmup steps,
/// then the schedule (constant, cosine to min_lr, linear to min_lr, or step decay).
class LrPlan {
 public:
  explicit LrPlan(const config::TrainConfig& train);
  /// The learning rate of update `step` (0 for the first; updates an fp16 overflow
  /// skipped do not count, as DeepSpeed holds its scheduler on them).
  double lr_at(int64_t step) const;

 private:
  double deepspeed_lr_at(int64_t step) const;

  config::Schedule kind_;
  bool deepspeed_;
  double base_, min_lr_;
  int64_t warmup_, total_;
  int64_t deepspeed_warmup_;  // as given: DeepSpeed does not cut it to the run
  optim::LrSchedule schedule_;
};

// ---- runs

/// "" unless one optimizer step reads more clips than the training data holds (each step
/// then spans more than an epoch, seldom what was meant), or, unshuffled, each epoch leaves
/// out the same last clips (those past a whole number of batches on every rank): a note
/// saying so and why (both, where both hold).
std::string epoch_note(int64_t batch, int64_t world, int64_t accumulation, int64_t dataset_size,
                       bool shuffle);

/// Writes the consolidated fp32 state of `engine` (original key names, buffers included) to
/// `out`, rank 0 creating its folder first. Every rank calls it.
void export_engine(zero::Engine& engine, const std::string& out, comm::Communicator& comm);

/// Saves a sharded checkpoint tagged by `step` with the config, the loader position (so
/// --resume continues the data where it stopped), every rank's random generator state
/// ("rng_state", see gather_rng_state) and the app's training `state` (rank 0's tensors,
/// see zero::CheckpointExtra::state), keeping train.keep_checkpoints. Every rank calls it.
/// Returns the checkpoint directory.
std::string save_training_checkpoint(zero::Engine& engine, const std::string& root, int64_t step,
                                     const config::AppConfig& cfg, const data::DataLoader& loader,
                                     const std::string& app_name,
                                     std::vector<std::pair<std::string, Tensor>> state = {});

}  // namespace zt::app
