// The vqtok application as library functions (apps/vqtok/main.cpp only parses arguments
// and launches ranks; tests call these directly on thread ranks). Every function runs on
// every rank of `comm`; only rank 0 prints and writes files.
//
//   train     the VqModel built under zero::Init and trained with ZeRO-3 (loss = l2 * MSE
//             + l1 * L1 + vq * (codebook + commitment * commit), straight-through), with
//             metrics.jsonl, curves.svg, recon_step_XXXXXX.png and checkpoints in output_dir
//   encode    clips or images -> token ids (.npy, int64): clips (N, T/f, H/s, W/s),
//             images (N, H/s, W/s), with f = model.temporal_downsample_factor and
//             s = 2^(len(model.ch_mult)-1) (4 and 8 for the released Emu3 model); a frozen
//             replica of the model on every rank
//   decode    token ids (.npy) -> PNG frames
//   evaluate  PSNR and codebook usage over a dataset
//   export    a checkpoint -> one consolidated fp32 safetensors file (buffers included)
//             with the original BAAI key names, or transformers' Emu3VQVAE names plus
//             its config.json
//
// Weights for encode/decode/evaluate come from an exported .safetensors file (either
// naming) or a checkpoint directory (a run's output_dir/checkpoints, or one step_XXXXXX
// directory in it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/common/plan.h"
#include "apps/common/train_util.h"
#include "apps/vqtok/model/vq_hf_keys.h"
#include "apps/vqtok/model/vq_model.h"
#include "data/loader.h"

namespace zt::vqtok {

// ---- train

/// The training objective on the model's outputs {recon, codes, loss_vq, loss_commit,
/// loss_codebook}: total = l2 * MSE + l1 * L1 + vq * (codebook + commitment * commit).
struct Losses {
  Tensor total, mse, l1, vq;
};
Losses objective(const std::vector<Tensor>& out, const Tensor& clips, const config::LossConfig& w);
/// The objective's VQ term before loss.vq: codebook + commitment * commit.
Tensor vq_term(const std::vector<Tensor>& out, double commitment);

/// cfg's model for training on `device`, seeded with train.seed, partitioned onto `device`
/// as it is built (zero::Init(comm, device)): no rank, and on a GPU not the host either,
/// ever holds all of it.
std::shared_ptr<vq::VqModel> build_model(const config::AppConfig& cfg, Device device,
                                         comm::Communicator& comm);

struct TrainOptions {
  bool resume = false;     ///< continue from the newest checkpoint in output_dir/checkpoints
  bool overwrite = false;  ///< a new run may delete an earlier run's results in output_dir
  bool quiet = false;      ///< print nothing (files are still written)
  bool tty = false;        ///< redraw a progress bar instead of printing log lines
  /// SIGINT/SIGTERM stop the run after a step, with a checkpoint (app::StopOnSignal);
  /// false leaves the signals' default action (a run that is useless unfinished), and
  /// keeps what --overwrite set aside until the run saved its last checkpoint.
  bool stop_on_signal = true;
};

struct TrainResult {
  int64_t start_step = 0;  ///< the step training started from (after a resume)
  int64_t steps = 0;       ///< the step the run reached (fp16 steps skipped for overflow count)
  std::vector<double> log_steps, log_losses, log_psnr;  ///< one entry per log interval
  double psnr = 0.0;                                    ///< of the last log window
  double eval_psnr = 0.0;                               ///< of the last evaluation (0 if none ran)
  app::CodebookStats codebook;                          ///< of the last log window
  double seconds_per_step = 0.0;
  std::string final_checkpoint;  ///< "" when checkpoints are off
  int stopped_by_signal = 0;     ///< SIGINT/SIGTERM that ended the run early (app::StopOnSignal)
  /// Times the loop read its losses back from the device (app::StepLog; a host wait each
  /// on a GPU): after the first step, at log, eval, restart and checkpoint steps.
  int64_t loss_reads = 0;
};

/// Trains cfg's model on cfg's data for cfg.train.steps optimizer steps (global step).
TrainResult train(const config::AppConfig& cfg, const TrainOptions& options,
                  comm::Communicator& comm);

/// `vqtok plan`: cfg's training memory per rank, predicted and measured on `steps` steps
/// of the config's first batch (apps/common/plan.h). Writes nothing.
app::PlanResult plan(const config::AppConfig& cfg, comm::Communicator& comm, int steps = 2,
                     bool quiet = false);

// ---- weights

/// The checkpoint root a run writes: <output_dir>/checkpoints.
std::string checkpoint_root(const config::AppConfig& cfg);
/// A frozen (requires_grad off), eval-mode VqModel replicated on every rank with the weights
/// of `source`: an exported .safetensors file (BAAI or transformers names, told apart by
/// the keys; a vqgpt export gives its tokenizer.* tensors) or a checkpoint directory; ""
/// uses the run's
/// checkpoint_root(cfg). Error naming the path and what to pass when nothing is there.
/// Rank 0 reads the weights; they reach the other ranks over `comm`. The replica lives on
/// `device` (a GPU: one rank per process, NCCL under mpirun).
std::shared_ptr<vq::VqModel> load_frozen_model(const config::AppConfig& cfg,
                                               const std::string& source, comm::Communicator& comm,
                                               Device device = Device::cpu());
/// A frozen (requires_grad off), eval-mode VqModel with rank 0's initial values on every
/// rank, on `device`: built in a zero::Replicated(comm, device) scope, each tensor moved to
/// the device and broadcast over `comm` as it registers.
std::shared_ptr<vq::VqModel> frozen_replica(const config::ModelConfig& model, Device device,
                                            comm::Communicator& comm);

// ---- encode / decode / evaluate / export

struct EncodeOptions {
  std::string weights;     ///< see load_frozen_model
  std::string input;       ///< .npy (N,T,3,H,W) clips or (N,3,H,W) images, an image
                           ///< file, a folder of images, or "" for the config's dataset
  bool eval_split = true;  ///< config dataset: held-out (true) or training split
  std::string out;         ///< .npy to write (rank 0); "" writes nothing
  int64_t limit = 0;       ///< encode at most this many items (0: all)
  int64_t batch = 0;       ///< items per forward (0: train.batch)
  bool verify = false;     ///< every rank encodes the first batch; ranks must agree
  bool quiet = false;      ///< print nothing
};

struct EncodeResult {
  /// i64 (N, T', h, w) or (N, h, w), identical on every rank; undefined when
  /// EncodeOptions::out is given (the codes go there a round of batches at a time, so that
  /// no rank holds them all: read the file).
  Tensor codes;
  bool images = false;
  /// --verify: each rank's hash of its codes for the first batch (indexed by rank).
  std::vector<uint64_t> verify_hashes;
};

/// Encodes the input's first `limit` items (all by default) to token ids with a frozen
/// replica on every rank: batches are dealt out over the ranks, a round at a time, and
/// assembled on every rank; rank 0 writes `out` (and, for images from a folder,
/// out + ".files.txt" naming the file each row was read from, one per line; a name with a
/// line break, or that starts with a double quote, is written quoted). Clips of T frames
/// give T' = ModelConfig::code_frames(T) code frames (1 for one-frame clips). Errors name
/// an item size the model's factors do not divide.
EncodeResult encode(const config::AppConfig& cfg, const EncodeOptions& options,
                    comm::Communicator& comm);

struct DecodeOptions {
  std::string weights;  ///< see load_frozen_model
  std::string codes;    ///< .npy of token ids: (N, T', h, w) clips or (N, h, w) images
  std::string out_dir;  ///< PNG frames written here (rank 0), plus grid.png
  int64_t batch = 0;    ///< clips per forward (0: train.batch)
  bool quiet = false;   ///< print nothing
};

/// Decodes every clip; returns the frames (N, T, 3, H, W) or images (N, 3, H, W) in
/// [-1, 1], identical on every rank: all N without an output folder, else the first 8
/// (the grid's), while the rest go to the folder a round (ranks x batch clips) at a
/// time, so no rank holds every clip's frames. Under data.frames: 1, codes (N, 1, h, w)
/// are of one-frame clips and decode to one frame each.
Tensor decode(const config::AppConfig& cfg, const DecodeOptions& options, comm::Communicator& comm);

/// A command's items per batch: its --batch, or train.batch where that is 0.
inline int64_t batch_of(const config::AppConfig& cfg, int64_t batch) {
  return batch > 0 ? batch : cfg.train.batch;
}

struct EvalOptions {
  std::string weights;     ///< see load_frozen_model
  bool eval_split = true;  ///< held-out (true) or training split
  int64_t batches = 0;     ///< per rank; 0: the whole split
  int64_t batch = 0;       ///< clips per rank per batch (0: train.batch)
};

struct EvalResult {
  double mse = 0.0, l1 = 0.0, psnr = 0.0;
  double loss_vq = 0.0;  ///< vq_term at the config's loss.commitment
  app::CodebookStats codebook;
  int64_t clips = 0;  ///< over all ranks
  nlohmann::json json() const;
};

/// Scores a frozen replica of the weights on the config's dataset (evaluate_batches over
/// the chosen split): reconstruction errors, PSNR, the VQ term and codebook usage, the same
/// on every rank.
EvalResult evaluate(const config::AppConfig& cfg, const EvalOptions& options,
                    comm::Communicator& comm);

/// The model's outputs for a batch of clips: {recon, codes, loss_vq, loss_commit,
/// loss_codebook} (VqModel::call or Engine::forward).
using ForwardFn = std::function<std::vector<Tensor>(const Tensor& clips)>;
/// Runs `forward` without gradients over the first `batches` batches of `loader` (0: one
/// epoch; every rank runs the same number) and reduces MSE, L1, the VQ term (vq_term at
/// cfg's loss.commitment) and codebook usage across ranks. `first` (optional) receives
/// this rank's first {inputs, reconstructions}.
EvalResult evaluate_batches(const ForwardFn& forward, data::DataLoader& loader, int64_t batches,
                            const config::AppConfig& cfg, comm::Communicator& comm,
                            std::vector<Tensor>* first = nullptr);

/// Loads checkpoint `checkpoint` (a directory or a root with `latest`) into cfg's model
/// and writes the consolidated fp32 safetensors file `out` (rank 0) with `naming`'s key
/// names; for KeyNaming::transformers also config.json (an Emu3VQVAEConfig) next to it, so
/// the folder loads with Emu3VQVAE.from_pretrained.
void export_model(const config::AppConfig& cfg, const std::string& checkpoint,
                  const std::string& out, comm::Communicator& comm, bool quiet = false,
                  vq::KeyNaming naming = vq::KeyNaming::baai);

}  // namespace zt::vqtok
