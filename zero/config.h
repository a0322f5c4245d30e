// zero::Config: the ZeRO-3 settings, with DeepSpeed's key names and defaults so existing
// `zero_optimization` sections carry over, plus zt's own buffer policy. Plain structs:
// built in code, or filled from a YAML or DeepSpeed JSON file by configs/ (zero/ reads
// no files and includes nothing from configs/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "zero/buffers_config.h"

namespace zt::zero {

/// The smallest fp16 loss scale: 2^-126, whose reciprocal (the step divides the fp32
/// gradients by the scale) is still a finite float.
inline constexpr double kLowestLossScale = 0x1p-126;

/// DeepSpeed's `bf16` and `fp16` sections. Parameters are stored (and computed) in the
/// low-precision type; fp32 master shards and fp32 gradient shards stay with the optimizer.
struct MixedPrecision {
  bool bf16 = false;
  bool fp16 = false;
  double loss_scale = 0;                // fp16: 0 = dynamic, else a fixed scale
  int initial_scale_power = 16;         // dynamic: start at 2^power
  int loss_scale_window = 1000;         // dynamic: doubles after window + 1 good steps in a row
  int hysteresis = 2;                   // dynamic: the overflows it takes to start halving
  bool consecutive_hysteresis = false;  // dynamic: a good step restores the hysteresis
  double min_loss_scale = 1;            // dynamic: never below this
  /// The parameter dtype this implies (f32 when neither is enabled).
  DType dtype() const { return bf16 ? DType::bf16 : fp16 ? DType::f16 : DType::f32; }
};

/// Where the optimizer's state lives: DeepSpeed's `offload_optimizer.device` (nvme is
/// not implemented).
enum class OffloadDevice : uint8_t { kNone, kCpu };

/// DeepSpeed's `offload_optimizer` section. With device kCpu the fp32 master shards and
/// the optimizer state (Adam's moments) live in host memory and the fused CPU optimizer
/// updates them there; gradient shards are copied down and updated parameter shards
/// copied up (zero/offload.h). When training on the CPU this changes nothing.
struct OffloadOptimizer {
  OffloadDevice device = OffloadDevice::kNone;
  /// Page-locked host buffers for the copies (asynchronous CUDA copies need them).
  bool pin_memory = false;
  bool enabled() const { return device == OffloadDevice::kCpu; }
};

/// Everything the engine is configured with. DeepSpeed's `contiguous_gradients` and
/// `stage3_gather_16bit_weights_on_model_save` have no field: gradients are always
/// reduced from contiguous buckets, and checkpoints always hold fp32 master shards.
struct Config {
  int stage = 3;  // only 3 is implemented
  /// Elements to prefetch ahead of the current module (0 disables prefetching).
  int64_t stage3_prefetch_bucket_size = 50'000'000;
  /// Parameters with at most this many elements stay gathered.
  int64_t stage3_param_persistence_threshold = 100'000;
  /// Upper bound on gathered elements held at once (prefetch stops there).
  int64_t stage3_max_live_parameters = 1'000'000'000;
  /// Keep a parameter gathered if the trace reuses it in fewer than this many elements (0
  /// turns reuse off).
  int64_t stage3_max_reuse_distance = 1'000'000'000;
  /// Elements per gradient bucket reduce-scattered at once.
  int64_t reduce_bucket_size = 500'000'000;
  /// Reduce buckets asynchronously while backward continues.
  bool overlap_comm = true;
  /// Top-level DeepSpeed keys.
  double gradient_clipping = 0.0;  // 0: off
  int gradient_accumulation_steps = 1;
  /// zt: buffer replication policy and replica checks.
  BuffersConfig buffers;
  /// zt: BatchNorm layers normalize with statistics over every rank's batch.
  bool sync_batchnorm = false;
  /// DeepSpeed's bf16 / fp16 sections.
  MixedPrecision precision;
  /// DeepSpeed's zero_optimization.offload_optimizer.
  OffloadOptimizer offload_optimizer;
  /// zt, set in code (no config key reads it): rank 0 prints none of the engine's notes to
  /// stderr (an fp16 overflow's skipped update, where offload_optimizer keeps the state,
  /// a timeline written, a module fetched out of the traced order); stats() still counts
  /// the skipped updates. The apps set it from their quiet option. Errors are thrown as ever.
  bool quiet = false;
};

/// Errors, naming the field and the value, unless every field of `config` is in range:
/// stage 3, sizes and verify_every >= 0, gradient_accumulation_steps >= 1, clipping a
/// finite value >= 0, at most one of bf16 and fp16, fp16's initial_scale_power 0 to 62.
/// Engine's constructor calls it; the YAML and DeepSpeed loaders check the same ranges.
void check_config(const Config& config);

}  // namespace zt::zero
