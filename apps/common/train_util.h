// Helpers shared by the training apps (vqtok, vqgpt): building the ZeRO-3 engine and the
// learning-rate plan from an AppConfig, window statistics reduced across ranks (scalars,
// codebook usage), PSNR, a JSON-lines metrics file (mirrored to TensorBoard on request), and a
// progress display that redraws one line on a terminal and prints one line per log interval
// otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "configs/app_config.h"
#include "core/step_graph.h"
#include "data/image.h"
#include "data/loader.h"
#include "data/tensorboard.h"
#include "optim/schedule.h"
#include "zero/checkpoint.h"
#include "zero/zero.h"

namespace zt::app {

/// How many eval items a training run's evaluation reads: train.eval_batches x batch x
/// `world` (0: all, when eval_batches is 0).
inline int64_t scored_eval_items(const config::AppConfig& cfg, int64_t world) {
  return cfg.train.eval_batches * cfg.train.batch * world;
}

// ---- engine construction

/// The optimizer settings of cfg.train (type, lr, betas, eps, weight decay, momentum).
zero::OptimizerConfig optimizer_config(const config::TrainConfig& train);
/// The engine's settings as configs/ parsed them: zero_optimization (DeepSpeed's key
/// names), bf16 / fp16 or train.dtype, the `buffers` policy, and gradient_clipping and
/// gradient_accumulation_steps from cfg.train.
zero::Config zero_config(const config::AppConfig& cfg);
/// Turns each module path of cfg.replicated into a full replica (error naming an unknown
/// path and listing the top-level modules).
void apply_replicated(nn::Module& model, const std::vector<std::string>& paths,
                      comm::Communicator& comm);
/// With train.activation_checkpointing, every module of `model` whose type is one of
/// `block_types` keeps no activations from forward to backward (recomputed in backward,
/// nn::Module::set_checkpointing); an error if none is. Returns how many.
int64_t checkpoint_activations(nn::Module& model, const config::TrainConfig& train,
                               const std::vector<std::string>& block_types);
/// An engine over `model` (built under zero::Init) with cfg's ZeRO and optimizer settings.
/// With bf16 / f16 each top-level submodule holding partitioned parameters computes in
/// that dtype while tensors enter and leave it in f32 (so losses and replicated f32 parts
/// are unchanged). Prints cfg.warnings once on rank 0; checks a DeepSpeed
/// train_batch_size against the world size. Records a timeline when train.trace is set.
std::unique_ptr<zero::Engine> make_engine(std::shared_ptr<nn::Module> model,
                                          const config::AppConfig& cfg, comm::Communicator& comm);
/// Why a GPU cannot be used here ("" when it can), to follow "<what> 'cuda' ": the build
/// has no CUDA, or no GPU is visible.
std::string cuda_missing();
/// The device training runs on, from train.device: cpu, or the GPU of this rank. "cuda"
/// needs a CUDA build and a visible GPU, and one rank per process: NCCL under mpirun (the
/// GPU of the local rank) or a single thread rank (thread ranks exchange host memory).
/// It applies train.attention (set_attention_kernel) and, on a GPU, train.tf32 (set_tf32,
/// core/device.h). Errors name `app` and the fix.
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

// ---- statistics

/// PSNR in dB of data in [-1, 1] (peak-to-peak 2): 10 log10(4 / mse); 99 for mse 0.
double psnr_from_mse(double mse);

/// Means of named scalars over a window of steps and over every rank. Every rank must add
/// the same names (the order does not matter) and call reduce() at the same steps.
class ScalarWindow {
 public:
  void add(const std::string& name, double value);
  /// Global means per name (sum over ranks / count over ranks), over the names any rank
  /// added (a rank whose micro-batches were all skipped for a non-finite loss added none);
  /// clears the window. Every rank calls it.
  std::vector<std::pair<std::string, double>> reduce(comm::Communicator& comm);
  bool empty() const { return names_.empty(); }

 private:
  std::vector<std::string> names_;  // sorted
  std::vector<double> sums_, counts_;
};

/// Codebook usage over a window: a histogram of code ids, summed across ranks.
struct CodebookStats {
  int64_t used = 0;         ///< distinct codes seen in the window (all ranks)
  double usage = 0.0;       ///< used / codebook_size
  double perplexity = 0.0;  ///< exp(entropy) of the code distribution
  int64_t tokens = 0;       ///< codes counted (all ranks)
};

class CodebookUsage {
 public:
  explicit CodebookUsage(int64_t codebook_size);
  /// Counts every id of `codes` (i64 or i32, any shape); error on an id outside [0, K).
  void add(const Tensor& codes);
  /// All-reduces the histogram (every rank must call) and clears the window.
  CodebookStats reduce(comm::Communicator& comm);

 private:
  std::vector<int64_t> counts_;
};

/// Seconds per step: mean over the steps since the last reset; ETA from it.
class StepTimer {
 public:
  void start() { t0_ = std::chrono::steady_clock::now(); }
  /// Ends a step started by start(); returns its seconds.
  double stop();
  /// Mean seconds per step of the current window, and clears it.
  double window_mean();
  /// Mean seconds per step over the whole run (0 before the first step).
  double run_mean() const { return steps_ ? total_ / static_cast<double>(steps_) : 0.0; }

 private:
  std::chrono::steady_clock::time_point t0_;
  double window_ = 0.0, total_ = 0.0;
  int64_t window_steps_ = 0, steps_ = 0;
};

// ---- output

/// "45s", "3m05s", "1h02m".
std::string format_duration(double seconds);
/// True when stdout is a terminal.
bool stdout_is_tty();
/// Says (stdout) that a run resumed at step `start` >= train.steps has nothing to train.
void say_nothing_to_train(const char* app, int64_t start, int64_t steps);

/// "" unless one optimizer step reads more clips than the training data holds (each step
/// then spans more than an epoch, seldom what was meant): a note saying so and why.
std::string epoch_note(int64_t batch, int64_t world, int64_t accumulation, int64_t dataset_size);

/// A JSON-lines file: one object per line, flushed after each write; optionally also
/// TensorBoard event files (train.tensorboard).
class MetricsWriter {
 public:
  /// Opens `path` (creating folders); `append` keeps existing lines.
  MetricsWriter(const std::string& path, bool append);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  /// Appends `record`; with TensorBoard on, each of its numeric fields (nested objects
  /// flattened with "/") also becomes a scalar at the record's "step", tagged
  /// "<kind>/<field>" when the record has a string "kind" (e.g. train/loss, eval/psnr).
  void write(const nlohmann::json& record);
  /// From now on, also writes TensorBoard event files into `dir` (a new file per call).
  /// A run resumed at `resumed_step` (> 0) starts its file with a session start at the
  /// next step, so that TensorBoard drops what an earlier run logged past the checkpoint,
  /// as filter_metrics does for metrics.jsonl.
  void enable_tensorboard(const std::string& dir, int64_t resumed_step = 0);
  /// With TensorBoard on, logs `img` (as PNG) under `tag` at `step`; otherwise nothing.
  void image(const std::string& tag, int64_t step, const data::Image& img);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::unique_ptr<data::TensorBoardWriter> tb_;
};

/// The records of a JSON-lines file (missing file: none); a bad line is an error naming
/// the file and line. With `torn` given, a bad last line (a write cut short by a crash) is
/// dropped instead and *torn says so; otherwise *torn is left "".
std::vector<nlohmann::json> read_metrics(const std::string& path, std::string* torn = nullptr);
/// Rewrites `path` (through a temporary file and a rename) keeping only the records for
/// which keep(record) is true, and dropping a torn last line. Returns a note for the user
/// naming what it dropped (the torn line, how many records), else "".
std::string filter_metrics(const std::string& path,
                           const std::function<bool(const nlohmann::json&)>& keep);

/// Training progress on stdout. On a terminal, update() redraws one line ("\r") with a
/// bar; elsewhere update() prints nothing and log lines carry the progress. The bar shows
/// what the caller passes: label a last-step value as such ("step loss") next to the log
/// lines' window means, and show measured statistics only once measured.
class Progress {
 public:
  /// `tty`: stdout is a terminal (stdout_is_tty()); ignored under mpirun, whose ranks
  /// write plain lines (no "\r" or escape codes in a log file).
  Progress(int64_t total_steps, bool tty);
  /// Redraws the bar for `step` (steps done) with `stats` after it (terminal only).
  void update(int64_t step, const std::string& stats);
  /// Prints a whole line (clearing the bar first on a terminal; it is redrawn by the next
  /// update()).
  void line(const std::string& text);
  /// Ends the bar line.
  void finish();
  bool tty() const { return tty_; }

 private:
  int64_t total_;
  bool tty_;
  bool drawn_ = false;
};

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
/// Continues `loader` where a loaded checkpoint's data stream stopped: after as many
/// samples of the saved epoch, also when the checkpoint was saved at another world size
/// or batch size (DataLoader::state_at_sample). Returns a note for the user when the
/// layout or the data set's size changed, empty otherwise.
std::string resume_data(data::DataLoader& loader, const zero::CheckpointExtra& extra);

/// Seeds this rank's default generator, which dropout draws from, with a stream of its own
/// derived from train.seed: dropout masks differ per rank, as each rank's data does. Call
/// after building the model (whose initialization is seeded alike on every rank).
void seed_dropout(const config::TrainConfig& train, const comm::Communicator& comm);

/// Every rank's default random generator state (seed, offset), as an i64 tensor
/// [world, 2] on every rank. Every rank must call it.
Tensor gather_rng_state(comm::Communicator& comm);
/// Sets this rank's default generator to its row of `state` (from gather_rng_state) when
/// `state` has one row per rank; returns false (generator unchanged) otherwise, or when
/// `state` is undefined (a checkpoint saved without it).
bool restore_rng_state(const Tensor& state, const comm::Communicator& comm);

/// The tensor `name` of a loaded checkpoint's app state, or an undefined tensor when the
/// checkpoint has none of that name (saved before it existed).
Tensor checkpoint_state(const std::vector<std::pair<std::string, Tensor>>& state,
                        const std::string& name);

}  // namespace zt::app
