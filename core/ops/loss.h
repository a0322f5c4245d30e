// Softmax family, losses and dropout.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace zt {

/// softmax of a floating x along dim, x's shape and dtype (16-bit inputs computed in f32
/// and rounded once).
Tensor softmax(const Tensor& x, int64_t dim);
/// log(softmax(x, dim)) computed stably, x's shape and dtype (16-bit inputs in f32).
Tensor log_softmax(const Tensor& x, int64_t dim);
// The losses below return f32 for bf16/f16 inputs, as they run under torch.autocast: a
// 16-bit loss would be rounded once more, and under fp16 the loss scale (65536 to start)
// times the loss seeds backward with inf (f16 holds at most 65504). The gradients they
// pass back are in the inputs' dtype.

/// logits (N, C) or (N, C, *) of any floating dtype, target i64 or i32 (N) or (N, *); mean
/// over targets != ignore_index (NaN when all are ignored), in the logits' dtype (f32 for
/// 16-bit logits). Fused:
/// nothing of the logits' size is stored beyond the logits themselves ((N, C, *) logits
/// are first copied class-last) and the gradient (one tensor like the logits).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100);

/// How a loss combines its positions: their mean, their sum, or none (one per position).
enum class Reduction { kMean, kSum, kNone };
/// torch.nn.functional.cross_entropy's options.
struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  /// The target mixes the one-hot class (1 - label_smoothing) with the uniform
  /// distribution (label_smoothing), in [0, 1].
  double label_smoothing = 0.0;
  /// kMean: over targets != ignore_index; kSum; kNone: (N) or (N, *), 0 where ignored.
  Reduction reduction = Reduction::kMean;
  /// Class weights (C), floating (undefined: all 1), as PyTorch's `weight`: each position's
  /// loss is scaled by its target's weight (the smoothing term by each class's), and
  /// kMean divides by the kept targets' weights summed instead of their count.
  Tensor weight = Tensor();
};
/// cross_entropy with options; the defaults run the fused kernels above, the others a
/// composition over log_softmax (which stores a tensor of the logits' size).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& o);
/// Mean squared error, mean reduction (16-bit inputs: computed in f32).
Tensor mse_loss(const Tensor& x, const Tensor& y);
/// Mean absolute error, mean reduction (16-bit inputs: computed in f32).
Tensor l1_loss(const Tensor& x, const Tensor& y);
/// Inverted dropout with keep-probability 1 - p, mask from the generator.
Tensor dropout(const Tensor& x, double p, bool training, Generator& g = default_generator());

}  // namespace zt
