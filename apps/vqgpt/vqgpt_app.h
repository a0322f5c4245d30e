// The vqgpt application as library functions (apps/vqgpt/main.cpp parses arguments and
// launches ranks; tests call these on thread ranks). Every function runs on every rank of
// `comm`; only rank 0 prints and writes files.
//
// The model is one root module with two children:
//   tokenizer  the Emu3-style VqModel, a frozen replica (built in a zero::Replicated scope,
//              requires_grad off, always in eval mode) loaded on rank 0 and broadcast by
//              zero::load_state_dict; the config's `replicated: [tokenizer]` names it. It
//              tokenizes each batch on every rank, without gradients or collectives.
//   gpt        the Gpt decoder, built under zero::Init and trained with ZeRO-3.
// The engine holds the tokenizer as a frozen replica (no hooks, no optimizer state, no
// gradient reduction) and checks at start and every buffers.verify_every steps that its
// parameters and BatchNorm buffers are identical on every rank. Checkpoints hold both
// children, so `sample` and `export` need nothing else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/common/plan.h"
#include "apps/common/train_util.h"
#include "apps/vqgpt/gpt_tokens.h"
#include "apps/vqgpt/model/gpt.h"
#include "apps/vqtok/model/vq_model.h"

namespace zt::vqgpt {

/// The root module: {tokenizer, gpt}. train()/eval() never take the tokenizer out of eval.
class VqGptModel : public nn::Module {
 public:
  VqGptModel(std::shared_ptr<vq::VqModel> tokenizer, std::shared_ptr<gpt::Gpt> gpt,
             gpt::TokenLayout layout);
  void train(bool on = true) override;

  /// clips (B, T, 3, H, W) on any device -> sequences i64 (B, L) on device()
  /// (gpt::tokenize).
  Tensor tokenize(const Tensor& clips);
  /// Mean next-token cross-entropy of sequences (B, L): inputs [0, L - 1), targets [1, L).
  Tensor loss(const Tensor& sequences);
  /// The same per sequence, (B): each one's mean over its own tokens, so that a score
  /// summed sequence by sequence does not depend on how they were batched (evaluation).
  Tensor sequence_losses(const Tensor& sequences);
  /// Where the model runs (the tokenizer's device; the Gpt's shards live there too).
  Device device() const;
  const gpt::TokenLayout& layout() const { return layout_; }

  std::shared_ptr<vq::VqModel> tokenizer;
  std::shared_ptr<gpt::Gpt> gpt;

 protected:
  /// {clips} -> {loss, sequences}.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  /// The GPT's logits (B, L - 1, V) for the inputs of sequences (B, L), and the targets.
  std::pair<Tensor, Tensor> logits_and_targets(const Tensor& sequences);

  gpt::TokenLayout layout_;
};

// ---- building

/// The tokenizer weights a run reads: `source`, or gpt.tokenizer_checkpoint when it is "".
std::string tokenizer_source(const config::AppConfig& cfg, const std::string& source);
/// Where those weights were named, as messages say: "--tokenizer" (TrainOptions::tokenizer)
/// when `source` is given, else "gpt.tokenizer_checkpoint".
std::string tokenizer_key(const std::string& source);
/// `cfg` as a run's checkpoints record it: gpt.tokenizer_checkpoint set to `path`, the
/// tokenizer the run trains with (its root is a copy; `cfg` is left as it was).
config::AppConfig with_tokenizer(const config::AppConfig& cfg, const std::string& path);
/// The gpt.tokenizer_checkpoint a checkpoint's config_yaml records ("" when not set).
std::string recorded_tokenizer(const std::string& config_yaml);
/// The frozen tokenizer replica with the weights of `source`: a vqtok checkpoint (a
/// directory holding meta.json, a root holding `latest`, or that `latest` file) or an
/// exported .safetensors file; "" uses gpt.tokenizer_checkpoint. Weights are read on rank
/// 0 (a checkpoint is gathered whole once) and broadcast. When nothing is there, an error
/// naming tokenizer_key(source): for --tokenizer, to check the path and what it takes; for
/// the config's key, also how to train one.
std::shared_ptr<vq::VqModel> load_tokenizer(const config::AppConfig& cfg, const std::string& source,
                                            comm::Communicator& comm,
                                            Device device = Device::cpu());
/// A frozen tokenizer replica with the same random initialization on every rank (weights
/// to be restored from a vqgpt checkpoint, or for tests).
std::shared_ptr<vq::VqModel> random_tokenizer(const config::AppConfig& cfg,
                                              comm::Communicator& comm,
                                              Device device = Device::cpu());
/// A Gpt of `spec` with GPT-2's initialization (gpt::init_gpt2) from the default generator,
/// partitioned over comm's ranks (or, with `replicated`, replicated: trainable replicas
/// whose gradients the engine all-reduces, i.e. plain data parallelism, for comparisons)
/// on `device`. It is built under zero::Init(comm, device), so no rank (and on a GPU, not the
/// host) ever holds the whole model, and initialized one module at a time
/// (zero::apply_gathered). Equal values for any number of ranks, on either device (a GPU's
/// normal draws equal the host's up to the last bit of its math library).
std::shared_ptr<gpt::Gpt> build_gpt(const gpt::GptSpec& spec, comm::Communicator& comm,
                                    Device device, bool replicated = false);
/// The root module around `tokenizer`, its Gpt (build_gpt) built from seed train.seed on the
/// tokenizer's device.
std::shared_ptr<VqGptModel> build_model(const config::AppConfig& cfg,
                                        std::shared_ptr<vq::VqModel> tokenizer,
                                        comm::Communicator& comm, bool replicated_gpt = false);
/// The engine over `model` with cfg's ZeRO and optimizer settings, built for `use`
/// (app::make_engine, `quiet` as there); cfg.replicated must name the tokenizer (error
/// otherwise: a partitioned tokenizer would all-gather on every call).
std::unique_ptr<zero::Engine> make_engine(std::shared_ptr<VqGptModel> model,
                                          const config::AppConfig& cfg, comm::Communicator& comm,
                                          app::EngineUse use, bool quiet = false);

// ---- train

struct TrainOptions {
  bool resume = false;     ///< continue from the newest checkpoint in output_dir/checkpoints
  bool overwrite = false;  ///< a new run may delete an earlier run's results in output_dir
  bool quiet = false;      ///< print nothing (files are still written)
  bool tty = false;        ///< redraw a progress bar instead of printing log lines
  std::string tokenizer;   ///< tokenizer weights; "" uses gpt.tokenizer_checkpoint
};

struct TrainResult {
  int64_t start_step = 0, steps = 0;
  std::vector<double> log_steps, log_losses;  ///< one entry per log interval (global means)
  double loss = 0.0;                          ///< of the last log window
  double eval_loss = 0.0;                     ///< of the last evaluation (0 if none ran)
  /// Entropy (nats) of the unigram distribution of every target token of the run, all
  /// ranks: the loss of a model that ignores context.
  double unigram_entropy = 0.0;
  double tokenizer_share =
      0.0;  ///< tokenization time / step time over the run (0 under cuda_graph)
  double seconds_per_step = 0.0;   ///< mean over the run
  double tokens_per_second = 0.0;  ///< trained target tokens (all ranks) per second
  /// The engine's replica checks that passed (zero::EngineStats::replica_verifications): at
  /// start, after a resume's load, and after each applied update buffers.verify_every selects.
  int64_t replica_checks = 0;
  std::string final_checkpoint;  ///< "" when checkpoints are off
  int stopped_by_signal = 0;     ///< SIGINT/SIGTERM that ended the run early (app::StopOnSignal)
  /// Times the loop read its losses back from the device (app::StepLog; a host wait each
  /// on a GPU): after the first step, at log, eval and checkpoint steps.
  int64_t loss_reads = 0;
};

/// Trains the Gpt on the frozen tokenizer's tokens of cfg's data for train.steps steps.
TrainResult train(const config::AppConfig& cfg, const TrainOptions& options,
                  comm::Communicator& comm);

/// The training loop's evaluation: the mean loss of the held-out sequences of `batches`
/// batches per rank of `loader` (an eval loader), each sequence's mean over its tokens,
/// added up in dataset order over every rank (the same bits on any number of ranks at one
/// batch size).
double evaluate(VqGptModel& model, data::DataLoader& loader, int64_t batches,
                comm::Communicator& comm);

struct EvalResult {
  int64_t step = 0;   ///< the checkpoint's step
  double loss = 0.0;  ///< as the training loop's evaluation scores it
  /// {"kind": "eval", "step", "loss"}: the training run's eval record in metrics.jsonl.
  nlohmann::json json() const;
};

/// `vqgpt eval`: the held-out loss of a vqgpt checkpoint (`checkpoint`, "" for
/// output_dir/checkpoints) on the eval split, over the items a training run's evaluation
/// scores (train.eval_batches x train.batch x ranks; 0 batches: the whole split).
EvalResult evaluate_checkpoint(const config::AppConfig& cfg, const std::string& checkpoint,
                               comm::Communicator& comm);

/// `vqgpt plan`: cfg's training memory per rank, predicted and measured on `steps` steps
/// of the config's first batch (apps/common/plan.h). Writes nothing.
app::PlanResult plan(const config::AppConfig& cfg, comm::Communicator& comm, int steps = 2,
                     bool quiet = false);

// ---- sample / export

struct SampleOptions {
  std::string checkpoint;  ///< a vqgpt checkpoint; "" uses output_dir/checkpoints
  std::string out;         ///< grid PNG to write (rank 0); "" writes none
  std::string tokens_out;  ///< also write the code ids (.npy, int64 (n, T', h, w)); optional
  int64_t num = 16;        ///< sequences to sample (split across ranks)
  gpt::SampleOptions sampling;
  bool quiet = false;
};

struct SampleResult {
  Tensor sequences;  ///< i64 (n, L), identical on every rank
  Tensor codes;      ///< i64 (n, T', h, w)
  /// Decoded in [-1, 1] on rank 0, which writes them: images (n, 3, H, W) or clips
  /// (n, T, 3, H, W). The other ranks hold 0 rows (each decoded its own and sent them).
  Tensor frames;
  /// What the grid shows, as printed (rank 0, with an --out; "" otherwise): it names the
  /// held-out row only where the sheet has one.
  std::string legend;
};

/// Loads a vqgpt checkpoint, samples `num` token sequences and decodes them with the
/// checkpoint's tokenizer into a grid of images. Rank 0 writes `tokens_out` and `out`
/// together: a grid that cannot be written leaves both files as they were.
SampleResult sample(const config::AppConfig& cfg, const SampleOptions& options,
                    comm::Communicator& comm);

/// Trains a quick tokenizer (vqtok train with cfg's model and data, `steps` steps, batch
/// 4 per rank, or cfg's train.batch where that is smaller) into gpt.tokenizer_checkpoint (or
/// `out_root` when given), so vqgpt can run without a separately trained one. A folder that already
/// holds checkpoints is an error unless `overwrite` (which sets them aside, and deletes them once
/// the new run has taken a step, as vqtok train --overwrite does). Returns the checkpoint
/// directory.
std::string train_quick_tokenizer(const config::AppConfig& cfg, int64_t steps,
                                  const std::string& out_root, comm::Communicator& comm,
                                  bool quiet = false, bool overwrite = false);

/// The checkpoint root a run writes: <output_dir>/checkpoints.
std::string checkpoint_root(const config::AppConfig& cfg);
/// Loads a vqgpt checkpoint and writes one fp32 safetensors file (tokenizer.* and gpt.*).
void export_model(const config::AppConfig& cfg, const std::string& checkpoint,
                  const std::string& out, comm::Communicator& comm, bool quiet = false);

}  // namespace zt::vqgpt
