// The validated configuration of the apps (vqtok, vqgpt): plain structs filled from a
// YAML file by load_app_config(). Defaults live here; every key is optional unless
// noted, and every value is checked (types, ranges, cross-field constraints such as
// embed_dim == z_channels or H, W divisible by the model's spatial factor).
//
// Top-level sections: model, data, train, loss, gpt (vqgpt only), zero_optimization,
// bf16, fp16 (DeepSpeed's key names), buffers, memory, replicated, output_dir, deepspeed_config
// (a DeepSpeed JSON file taking over the engine's settings, configs/deepspeed.h). Every section is
// parsed here into its owner's plain struct (data::DataConfig, zero::Config); unknown
// keys and keys without a value are errors with file, line and the nearest valid key.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "configs/config.h"
#include "data/data_config.h"
#include "optim/factory.h"
#include "zero/config.h"

namespace zt::config {

/// The Emu3-style VQ tokenizer (see docs/EMU3_TOKENIZER.md); the defaults are the small
/// model zt-bench vqtok-step times (4.29M parameters; configs/vqtok_tiny.yaml is smaller).
struct ModelConfig {
  int64_t codebook_size = 1024;
  int64_t embed_dim = 4;  ///< must equal z_channels
  int64_t z_channels = 4;
  int64_t in_channels = 3;
  int64_t out_channels = 3;
  int64_t temporal_downsample_factor = 4;  ///< a power of two; log2 = temporal layers
  int64_t ch = 32;                         ///< a multiple of 32 (GroupNorm(32))
  std::vector<int64_t> ch_mult = {1, 2, 2, 4};
  int64_t num_res_blocks = 2;
  std::vector<int64_t> attn_resolutions = {3};  ///< level indices into ch_mult
  double dropout = 0.0;
  bool l2_norm_codes = false;  ///< cosine codes: l2-normalize latents and codes before lookup
  /// Scales the initial weight of the last conv of every 2-D residual branch and of the
  /// decoder's conv_out (1: the released model's init; small: blocks start near identity).
  double out_init_scale = 1.0;

  /// 2^(len(ch_mult) - 1): H and W must be multiples of it.
  int64_t spatial_factor() const { return int64_t{1} << (ch_mult.size() - 1); }
  /// The code frames T' of a clip of `frames` frames: frames / temporal_downsample_factor,
  /// and 1 for a one-frame clip (data.frames: 1), an image, which the tokenizer repeats to
  /// temporal_downsample_factor frames. 0 when `frames` is neither 1 nor a multiple of it.
  int64_t code_frames(int64_t frames) const;
  /// log2(temporal_downsample_factor).
  int64_t temporal_layers() const;
};

/// Every key of ModelConfig, listed once for the code that reads them (configs/) and the
/// code that compares two (a resume's check, apps/common/saved_run.cpp): calls
/// visit(key, member pointer, lo, hi, shapes_weights) per key. lo and hi bound a number
/// (each element of a list; a bool has none); shapes_weights is true for a key that
/// changes the weights' names or shapes.
template <typename Visit>
void for_each_model_key(Visit&& visit) {
  using M = ModelConfig;
  using I = int64_t;
  visit("codebook_size", &M::codebook_size, I{2}, I{1} << 30, true);
  visit("embed_dim", &M::embed_dim, I{1}, I{4096}, true);
  visit("z_channels", &M::z_channels, I{1}, I{4096}, true);
  visit("in_channels", &M::in_channels, I{1}, I{64}, true);
  visit("out_channels", &M::out_channels, I{1}, I{64}, true);
  visit("temporal_downsample_factor", &M::temporal_downsample_factor, I{1}, I{64}, true);
  visit("ch", &M::ch, I{1}, I{1} << 16, true);
  visit("ch_mult", &M::ch_mult, I{1}, I{64}, true);
  visit("num_res_blocks", &M::num_res_blocks, I{1}, I{64}, true);
  visit("attn_resolutions", &M::attn_resolutions, I{0}, I{63}, true);
  visit("l2_norm_codes", &M::l2_norm_codes, I{0}, I{1}, true);
  visit("dropout", &M::dropout, 0.0, 0.99, false);
  visit("out_init_scale", &M::out_init_scale, 0.0, 10.0, false);
}

enum class Optimizer { adamw, adam, sgd };
enum class Schedule { constant, cosine, linear, step };
/// The config's spelling of each value ({"adamw", Optimizer::adamw}, ...): the names the
/// YAML reads and the *_name() functions print.
extern const std::vector<std::pair<std::string, Optimizer>> kOptimizerNames;
extern const std::vector<std::pair<std::string, Schedule>> kScheduleNames;
extern const std::vector<std::pair<std::string, data::DataKind>> kDataKindNames;
extern const std::vector<std::pair<std::string, data::Filter>> kFilterNames;
extern const std::vector<std::pair<std::string, data::Fit>> kFitNames;
extern const std::vector<std::pair<std::string, data::OnBadImage>> kBadImageNames;
/// The config's spelling of each: "adamw", ...; "constant", ...; "synthetic", ...;
/// "bicubic", ...; "crop", ...; "error", ...
const char* optimizer_name(Optimizer o);
const char* schedule_name(Schedule s);
/// Whether schedule `s` has a floor, train.min_lr (cosine and linear).
inline bool has_lr_floor(Schedule s) {
  return s == Schedule::cosine || s == Schedule::linear;
}
/// Why SGD cannot take Nesterov momentum with these settings ("" when it can): it needs
/// momentum > 0 and dampening 0, as torch.optim.SGD does.
std::string nesterov_problem(double momentum, double dampening);
const char* data_kind_name(data::DataKind k);
const char* filter_name(data::Filter f);
const char* fit_name(data::Fit f);
const char* bad_image_name(data::OnBadImage b);

/// The optimization loop. `batch` is per rank (global batch = batch * ranks).
struct TrainConfig {
  int64_t steps = 300;
  int64_t batch = 4;
  Optimizer optimizer = Optimizer::adamw;
  double lr = 1e-3;
  Schedule schedule = Schedule::cosine;
  int64_t warmup = 0;       ///< linear warmup: update s (from 0) runs at lr * (s + 1) / warmup
  double min_lr = 0.0;      ///< cosine/linear floor
  int64_t step_size = 100;  ///< schedule step: decay every step_size steps
  /// Set by a DeepSpeed scheduler: updates are counted as DeepSpeed's schedulers count
  /// them (app::LrPlan), not as zt's own schedules do.
  bool deepspeed_schedule = false;
  double gamma = 0.1;  ///< schedule step: decay factor
  double weight_decay = 0.0;
  /// Whether parameters of fewer than two dimensions (biases, norm scales) take weight decay.
  bool weight_decay_1d = true;
  /// Name patterns ('*': any run of characters) of parameters that take no weight decay.
  std::vector<std::string> no_weight_decay;
  /// Parameters with a learning-rate scale or weight decay of their own.
  std::vector<optim::ParamGroup> param_groups;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double momentum = 0.0;         ///< sgd only (0, as torch.optim.SGD and DeepSpeed's SGD)
  double dampening = 0.0;        ///< sgd only
  bool nesterov = false;         ///< sgd only (needs momentum > 0 and dampening 0)
  double gradient_clipping = 0;  ///< max global grad norm; 0 disables
  int64_t gradient_accumulation_steps = 1;
  int64_t log_every = 10;
  int64_t eval_every = 100;        ///< 0 disables
  int64_t eval_batches = 4;        ///< batches per rank an evaluation scores; 0: the whole split
  int64_t checkpoint_every = 100;  ///< 0 disables
  int64_t keep_checkpoints = 2;    ///< 0 keeps all
  /// vqtok: every this many steps, codes no rank used since the last restart are moved
  /// next to used ones (a small random offset from a used code); 0 disables.
  int64_t codebook_restart_every = 0;
  int64_t seed = 0;            ///< model init, dropout
  std::string device = "cpu";  ///< "cpu" or "cuda"
  /// TF32 tensor cores for f32 work on CUDA: "conv" (convolutions only, PyTorch's
  /// default), "all" (also matrix multiplies) or "none" (exact fp32).
  std::string tf32 = "conv";
  /// cuDNN algorithm choice on CUDA (zt::set_conv_algo_policy): true times each
  /// convolution shape's candidates once and keeps the fastest (PyTorch's
  /// cudnn.benchmark), false takes cuDNN's heuristic ranking; unset keeps the process's
  /// choice (ZT_CUDNN_BENCHMARK, else false).
  std::optional<bool> cudnn_benchmark{};
  /// cuBLASLt algorithm choice on CUDA (zt::set_gemm_benchmark): true times each GEMM
  /// problem's candidates once and keeps the fastest (PyTorch's TunableOp), false takes
  /// cuBLAS's and cuBLASLt's heuristics; unset keeps the process's choice
  /// (ZT_GEMM_BENCHMARK, else false).
  std::optional<bool> gemm_benchmark{};
  /// true: deterministic cuDNN algorithms first (the same bits every run); false: all
  /// compete, those that sum with atomics included (PyTorch's cudnn.deterministic).
  bool cudnn_deterministic = true;
  /// scaled_dot_product_attention's kernels (zt::set_attention_kernel): "auto" (fused on a
  /// GPU for bf16/f16 heads of 32-128, batched GEMMs otherwise), "flash" (fused wherever
  /// supported, the CPU's slow emulation included) or "math" (batched GEMMs only); unset
  /// keeps the process's choice (ZT_ATTENTION, else auto).
  std::string attention{};
  /// The fused attention backward's way to dq (zt::flash::set_backward): "split" (a dq
  /// pass, then dk / dv; the same bits every run) or "atomic" (one pass, dq's shares added
  /// in f32 by atomics: fewer products, dq's last bits vary); unset keeps the process's
  /// choice (ZT_FLASH_BACKWARD, else split).
  std::string flash_backward{};
  /// Storage and compute dtype of the partitioned parameters: f32, bf16 or f16. bf16
  /// and f16 are the same as enabling the bf16 / fp16 section; after parsing this is the
  /// effective dtype whichever way it was asked for.
  std::string dtype = "f32";
  std::string resume{};  ///< a checkpoint directory, "auto" (latest) or ""
  /// A Chrome trace event file (Perfetto, chrome://tracing) of the first trace_steps
  /// optimizer steps: compute, all-gathers, releases, reduce-scatters, memory. "" = off.
  std::string trace{};
  int64_t trace_steps = 2;
  bool tensorboard = false;  ///< also write TensorBoard event files to <output_dir>/tb
  /// Capture the training step as a CUDA graph after two warm-up steps and replay it
  /// (core/step_graph.h). Needs device cuda, one rank, no gradient accumulation, no fp16,
  /// no offload, no trace, no dropout.
  bool cuda_graph = false;
  /// Keep no activations inside each transformer block (vqgpt) or each residual and
  /// attention block (vqtok) from forward to backward: backward recomputes them
  /// (nn::Module::set_checkpointing). Less activation memory for about one more forward.
  bool activation_checkpointing = false;
};

/// vqtok's objective: l2 * MSE + l1 * L1 + vq * (codebook + commitment * commit).
struct LossConfig {
  double l2 = 1.0;
  double l1 = 0.0;
  double vq = 1.0;
  double commitment = 0.25;
};

/// vqgpt's transformer over tokenizer codes.
struct GptConfig {
  int64_t vocab_size = 0;  ///< 0: codebook_size + 3 (then BOS, EOL, EOS)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;    ///< a multiple of n_head
  int64_t block_size = 0;  ///< 0: BOS + codes + one EOL per row; else >= that
  double dropout = 0.0;
  bool tie_embeddings = false;         ///< one matrix for the token table and the output head
  bool fused_qkv = false;              ///< one q/k/v projection per block (GPT-2's c_attn)
  std::string tokenizer_checkpoint{};  ///< the trained vqtok checkpoint (required)
};

/// Which top-level sections an app accepts.
enum class App { vqtok, vqgpt, any };

/// The most clips of a batch per rank (train.batch, a DeepSpeed micro batch) and the most
/// eval batches: as many as a permutation of the samples holds (data.num_samples), so that
/// a product with the accumulation steps stays inside 64 bits (one with the world size too
/// is checked in 128 bits).
constexpr int64_t kMaxBatch = int64_t{1} << 27;

/// Everything an app reads from its YAML file.
struct AppConfig {
  std::string source;  ///< the config file
  ModelConfig model;
  zt::data::DataConfig data;
  TrainConfig train;
  LossConfig loss;
  std::optional<GptConfig> gpt;  ///< present in vqgpt configs
  /// The engine's settings: zero_optimization, bf16 / fp16 (or train.dtype) as
  /// `precision`, `buffers`, and train.gradient_clipping / gradient_accumulation_steps.
  zt::zero::Config zero;
  std::vector<std::string> replicated;  ///< module paths kept out of partitioning
  std::string output_dir;               ///< default: runs/<config file stem>
  /// memory.limit: bytes each rank may hold on each device (0: none; ZT_MEMORY_LIMIT
  /// applies when unset). Past it an allocation fails naming the largest consumers.
  int64_t memory_limit = 0;
  Node root;  ///< the whole tree (after overrides), for logs
  /// Keys accepted for compatibility that change nothing in zt (and YAML values a
  /// DeepSpeed config replaced), one message each; every command prints them once.
  std::vector<std::string> warnings;
  /// The same about settings only training reads (the optimizer's, the schedule's, the
  /// warmup's): app::make_engine prints them for training and planning, so a command that
  /// only reads weights (sample, eval) is not told about its config's training.
  std::vector<std::string> training_warnings;

  /// The DeepSpeed config applied (deepspeed_config: path, or --deepspeed), or "".
  std::string deepspeed_config;
  /// That file's text as it was read here: a checkpoint records it, so a save never reads
  /// the file again (it may be gone or edited by then).
  std::string deepspeed_json;
  /// DeepSpeed's train_batch_size (0: not given), checked against batch x accumulation x
  /// world size at launch (config::check_world_size), and where it was written.
  int64_t train_batch_size = 0;
  std::string train_batch_size_where;

  /// Tokens per clip: (frames / t) * (height / s) * (width / s); an image is one latent frame
  /// (it is repeated to temporal_downsample_factor frames).
  int64_t tokens_per_clip() const;
};

/// Loads, overrides (`--set key.path=value` strings) and validates a config file.
/// `app` restricts the accepted sections: vqtok rejects `gpt`, vqgpt requires it.
AppConfig load_app_config(const std::string& path, const std::vector<Override>& overrides = {},
                          App app = App::any);
/// The text of the config file at `path` (read_config_text, with load_app_config's hint).
std::string read_app_config_text(const std::string& path);
/// load_app_config of `text`, the config file read from `path` (read_app_config_text): for a
/// text read once and shared, such as standard input under mpirun (comm::read_on_rank0).
AppConfig load_app_config_text(const std::string& text, const std::string& path,
                               const std::vector<Override>& overrides = {}, App app = App::any);
/// The same from an already loaded tree (tests, or configs built in code).
AppConfig parse_app_config(const Node& root, App app = App::any);

}  // namespace zt::config
