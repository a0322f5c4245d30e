// Normalization layers: BatchNorm1d/2d/3d (PyTorch semantics, with a hook for
// synchronized batch statistics), GroupNorm, InstanceNorm1d/2d/3d, LayerNorm, RMSNorm. Legend: N
// batch, C channels, * spatial dims (none or L, H, W, or D, H, W), G groups.
#pragma once

#include <functional>
#include <optional>

#include "nn/module.h"
#include "nn/options.h"

namespace zt::nn {

/// Options for BatchNorm: BatchNormOptions(C).eps(1e-5).momentum(0.1).affine(true).
struct BatchNormOptions {
  /* implicit */ BatchNormOptions(int64_t num_features) : num_features_(num_features) {}
  ZT_ARG(int64_t, num_features);
  ZT_ARG(double, eps) = 1e-5;
  /// Running-stat factor; std::nullopt gives a cumulative average (1 / num_batches_tracked).
  ZT_ARG(std::optional<double>, momentum) = 0.1;
  ZT_ARG(bool, affine) = true;
  ZT_ARG(bool, track_running_stats) = true;
};

/// Per-channel batch statistics handed to a BatchNorm stats_reducer.
struct BatchNormStats {
  Tensor sum;        // (C), f64: sum of x over (N, *)
  Tensor sum_sq;     // (C), f64: sum of x^2 over (N, *)
  double count = 0;  // elements per channel, N * prod(*)
};

/// Maps this rank's statistics to the global ones (synchronized BatchNorm). It must be
/// differentiable: implement it as an autograd function whose forward all-reduces (sum)
/// `sum`, `sum_sq` and `count`, and whose backward all-reduces (sum) the gradients of
/// `sum` and `sum_sq` — every rank's loss depends on every rank's local sums.
using BatchNormStatsReducer = std::function<BatchNormStats(const BatchNormStats& local)>;

/// Batch normalization over (N, *) per channel, as torch.nn.BatchNorm{1,2,3}d: training uses
/// the batch statistics (biased variance) and updates running_mean / running_var (unbiased)
/// with `momentum` and counts num_batches_tracked; eval uses the running statistics.
/// Buffers: running_mean (C) f32, running_var (C) f32, num_batches_tracked i64 scalar.
class BatchNorm : public UnaryModule {
 public:
  /// Normalizes inputs with `spatial_dims` dims after (N, C); 1 also takes none (N, C).
  BatchNorm(const BatchNormOptions& options, int64_t spatial_dims, const char* type_name);
  /// Running stats to (0, 1), num_batches_tracked to 0.
  void reset_running_stats();
  /// reset_running_stats(), weight to 1 and bias to 0.
  void reset_parameters();
  std::string extra_repr() const override;
  /// num_batches_tracked: older and converted checkpoints lack it.
  bool state_entry_optional(const std::string& local_name) const override {
    return local_name == "num_batches_tracked";
  }

  BatchNormOptions options;
  Tensor weight, bias;                                    // (C) when affine
  Tensor running_mean, running_var, num_batches_tracked;  // when track_running_stats
  /// If set, training-mode statistics go through it (see BatchNormStatsReducer); the
  /// normalization is then computed from sums with autograd-aware ops.
  BatchNormStatsReducer stats_reducer;

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  Tensor forward_reduced(const Tensor& x, double factor);
  bool updates_running_stats() const;
  int64_t spatial_dims_;
};

/// x (N, C) or (N, C, L).
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(const BatchNormOptions& options) : BatchNorm(options, 1, "BatchNorm1d") {}
};

/// x (N, C, H, W).
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(const BatchNormOptions& options) : BatchNorm(options, 2, "BatchNorm2d") {}
};

/// x (N, C, D, H, W).
class BatchNorm3d : public BatchNorm {
 public:
  explicit BatchNorm3d(const BatchNormOptions& options) : BatchNorm(options, 3, "BatchNorm3d") {}
};

/// Options for GroupNorm: GroupNormOptions(G, C).eps(1e-6) (default eps 1e-5, as PyTorch's).
/// silu(true): the module's output is silu(norm), computed in the norm's kernels (what
/// `silu(norm(x))` computes, without the pass and the saved tensor of its own).
struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  ZT_ARG(int64_t, num_groups);
  ZT_ARG(int64_t, num_channels);
  ZT_ARG(double, eps) = 1e-5;
  ZT_ARG(bool, affine) = true;
  ZT_ARG(bool, silu) = false;
};

/// x (N, C, *) normalized over each group of C / G channels and *; weight 1, bias 0.
/// Called as m(x) or m(x, scale, shift), scale and shift shaped like x: the output is then
/// norm(x) * scale + shift (a spatially modulated norm), in the norm's kernels; silu
/// (options) applies last.
class GroupNorm : public UnaryModule {
 public:
  explicit GroupNorm(const GroupNormOptions& options);
  std::string extra_repr() const override;
  /// m(x, scale, shift).
  Tensor operator()(const Tensor& x, const Tensor& scale, const Tensor& shift) {
    return first(call({x, scale, shift}));
  }
  using UnaryModule::operator();

  GroupNormOptions options;
  Tensor weight, bias;  // (C) when affine

 protected:
  Tensor forward(const Tensor& x) override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

/// Options for InstanceNorm: InstanceNormOptions(C).eps(1e-5).affine(false), PyTorch's
/// defaults. track_running_stats(true) is refused: the statistics are always the input's
/// own, per sample and channel.
struct InstanceNormOptions {
  explicit InstanceNormOptions(int64_t num_features) : num_features_(num_features) {}
  ZT_ARG(int64_t, num_features);
  ZT_ARG(double, eps) = 1e-5;
  ZT_ARG(bool, affine) = false;
  ZT_ARG(bool, track_running_stats) = false;
};

/// x (N, C, *) with `spatial_dims` dims in *, each (sample, channel) normalized over *
/// (GroupNorm with one channel per group); weight (C) 1 and bias (C) 0 when affine.
class InstanceNorm : public UnaryModule {
 public:
  InstanceNorm(const InstanceNormOptions& options, int64_t spatial_dims, const char* type_name);
  std::string extra_repr() const override;

  InstanceNormOptions options;
  Tensor weight, bias;  // (C) when affine

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  int64_t spatial_dims_;
};

/// x (N, C, L).
class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(const InstanceNormOptions& options)
      : InstanceNorm(options, 1, "InstanceNorm1d") {}
};

/// x (N, C, H, W).
class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(const InstanceNormOptions& options)
      : InstanceNorm(options, 2, "InstanceNorm2d") {}
};

/// x (N, C, D, H, W).
class InstanceNorm3d : public InstanceNorm {
 public:
  explicit InstanceNorm3d(const InstanceNormOptions& options)
      : InstanceNorm(options, 3, "InstanceNorm3d") {}
};

/// Options for LayerNorm: LayerNormOptions({D}).eps(1e-5).elementwise_affine(true).
struct LayerNormOptions {
  /* implicit */ LayerNormOptions(Shape normalized_shape)
      : normalized_shape_(std::move(normalized_shape)) {}
  ZT_ARG(Shape, normalized_shape);
  ZT_ARG(double, eps) = 1e-5;
  ZT_ARG(bool, elementwise_affine) = true;
  ZT_ARG(bool, bias) = true;
};

/// x (..., *normalized_shape) normalized over the trailing dims; weight 1, bias 0.
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(const LayerNormOptions& options);
  std::string extra_repr() const override;

  LayerNormOptions options;
  Tensor weight, bias;  // normalized_shape, when elementwise_affine (bias when bias())

 protected:
  Tensor forward(const Tensor& x) override;
};

/// Options for RMSNorm: RMSNormOptions({D}).eps(1e-6).elementwise_affine(true).
struct RMSNormOptions {
  /* implicit */ RMSNormOptions(Shape normalized_shape)
      : normalized_shape_(std::move(normalized_shape)) {}
  ZT_ARG(Shape, normalized_shape);
  /// std::nullopt (the default): the machine_epsilon of the dtype it normalizes in (the
  /// input's; f32 for bf16/f16 inputs), as PyTorch's since January 2025 (earlier releases,
  /// 2.5 among them, took the 16-bit dtype's: 2^-7 for bf16, which swamps small rows).
  ZT_ARG(std::optional<double>, eps) = std::nullopt;
  ZT_ARG(bool, elementwise_affine) = true;
};

/// x (..., *normalized_shape): x / sqrt(mean(x^2) + eps) * weight; weight 1.
class RMSNorm : public UnaryModule {
 public:
  explicit RMSNorm(const RMSNormOptions& options);
  std::string extra_repr() const override;

  RMSNormOptions options;
  Tensor weight;  // normalized_shape, when elementwise_affine

 protected:
  Tensor forward(const Tensor& x) override;
};

}  // namespace zt::nn
