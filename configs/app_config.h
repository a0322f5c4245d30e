// The validated configuration of the apps (vqtok, vqgpt): plain structs filled from a
// YAML file by load_app_config(). Defaults live here; every key is optional unless
// noted, and every value is checked (types, ranges, cross-field constraints such as
// embed_dim == z_channels or H, W divisible by the model's spatial factor).
//
// Top-level sections: model, data, train, loss, gpt (vqgpt only), zero_optimization
// (kept as a raw config::Node: zt::zero parses it with DeepSpeed's key names),
// buffers, replicated, output_dir.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "configs/config.h"

namespace zt::config {

/// The Emu3-style VQ tokenizer (see EMU3_TOKENIZER.md); defaults are the tiny model.
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
  /// log2(temporal_downsample_factor).
  int64_t temporal_layers() const;
};

enum class DataKind { synthetic, image_folder, npy };
enum class ResizeFilter { bilinear, bicubic };

/// Where clips come from. Clips are (frames, 3, height, width) in [-1, 1].
struct DataConfig {
  DataKind kind = DataKind::synthetic;
  std::string path{};   ///< image_folder: a directory; npy: a .npy file
  int64_t frames = 4;   ///< a single image is repeated to this many frames
  int64_t height = 32;  ///< images are resized to height x width
  int64_t width = 32;
  int64_t num_samples = 4096;  ///< synthetic only: dataset size
  int64_t eval_samples = 64;   ///< held-out clips for eval (synthetic: another seed)
  int64_t seed = 1234;         ///< synthetic content and sampler shuffling
  bool shuffle = true;
  int64_t workers = 1;   ///< threads preparing samples of a batch
  int64_t prefetch = 2;  ///< batches prepared ahead
  ResizeFilter resize = ResizeFilter::bicubic;
  int64_t num_shapes = 2;  ///< synthetic: moving shapes per clip
};

enum class Optimizer { adamw, adam, sgd };
enum class Schedule { constant, cosine, linear, step };

/// The optimization loop. `batch` is per rank (global batch = batch * ranks).
struct TrainConfig {
  int64_t steps = 300;
  int64_t batch = 4;
  Optimizer optimizer = Optimizer::adamw;
  double lr = 1e-3;
  Schedule schedule = Schedule::cosine;
  int64_t warmup = 0;       ///< linear warmup steps from 0 to lr
  double min_lr = 0.0;      ///< cosine/linear floor
  int64_t step_size = 100;  ///< schedule step: decay every step_size steps
  double gamma = 0.1;       ///< schedule step: decay factor
  double weight_decay = 0.0;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double momentum = 0.9;         ///< sgd only
  double gradient_clipping = 0;  ///< max global grad norm; 0 disables
  int64_t gradient_accumulation_steps = 1;
  int64_t log_every = 10;
  int64_t eval_every = 100;  ///< 0 disables
  int64_t eval_batches = 4;
  int64_t checkpoint_every = 100;  ///< 0 disables
  int64_t keep_checkpoints = 2;    ///< 0 keeps all
  /// vqtok: every this many steps, codes no rank used since the last restart are moved
  /// next to used ones (a small random offset from a used code); 0 disables.
  int64_t codebook_restart_every = 0;
  int64_t seed = 0;            ///< model init, dropout
  std::string device = "cpu";  ///< "cpu" or "cuda"
  std::string dtype = "f32";   ///< compute dtype of parameters: f32, bf16, f16
  std::string resume{};        ///< a checkpoint directory, "auto" (latest) or ""
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
  std::string tokenizer_checkpoint{};  ///< the trained vqtok checkpoint (required)
};

enum class BufferSync { broadcast, average, none };
/// Spelling of a BufferSync ("broadcast", "average", "none").
const char* buffer_sync_name(BufferSync s);

/// A buffer sync policy for one module subtree (dotted path, "" = everything).
struct BufferPolicy {
  std::string module{};
  BufferSync sync = BufferSync::average;
};

/// zt's `buffers` section: a default policy, per-module exceptions, replica checks.
struct BuffersConfig {
  BufferSync sync = BufferSync::average;
  std::vector<BufferPolicy> modules;
  int64_t verify_every = 0;  ///< steps between replica checks; 0: after init/load only
  /// The policy for a buffer name: the longest module prefix (at a '.' boundary) wins.
  BufferSync sync_for(const std::string& buffer_name) const;
};

/// Which top-level sections an app accepts.
enum class App { vqtok, vqgpt, any };

/// Everything an app reads from its YAML file.
struct AppConfig {
  std::string source;  ///< the config file
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  LossConfig loss;
  std::optional<GptConfig> gpt;  ///< present in vqgpt configs
  Node zero_optimization;        ///< raw; parsed by zt::zero (absent: its defaults)
  Node bf16, fp16;               ///< raw DeepSpeed mixed-precision sections (zt::zero parses)
  BuffersConfig buffers;
  std::vector<std::string> replicated;  ///< module paths kept out of partitioning
  std::string output_dir;               ///< default: runs/<config file stem>
  Node root;                            ///< the whole tree (after overrides), for logs

  /// Tokens per clip: (frames / t) * (height / s) * (width / s); images count as 4 frames.
  int64_t tokens_per_clip() const;
};

/// Loads, overrides (`--set key.path=value` strings) and validates a config file.
/// `app` restricts the accepted sections: vqtok rejects `gpt`, vqgpt requires it.
AppConfig load_app_config(const std::string& path, const std::vector<std::string>& overrides = {},
                          App app = App::any);
/// The same from an already loaded tree (tests, or configs built in code).
AppConfig parse_app_config(const Node& root, App app = App::any);

}  // namespace zt::config
