// Softmax family, losses and dropout. Legend: N batch, C classes, * extra positions.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace zt {

/// softmax of a floating x along dim, x's shape and dtype (16-bit inputs computed in f32
/// and rounded once).
Tensor softmax(const Tensor& x, int64_t dim);
/// log(softmax(x, dim)) computed stably, x's shape and dtype (16-bit inputs in f32).
Tensor log_softmax(const Tensor& x, int64_t dim);
/// How a loss combines its positions: their mean, their sum, none (one loss per position),
/// or kl_div's batchmean (the sum divided by the batch size, dim 0); the other losses
/// refuse kBatchMean. kMean over no positions at all is an error naming the loss (except
/// for the class-index losses, where it is NaN as it is with every target ignored).
enum class Reduction { kMean, kSum, kNone, kBatchMean };
/// PyTorch's name for r: "mean", "sum", "none" or "batchmean".
const char* reduction_name(Reduction r);

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

/// torch.nn.functional.nll_loss's options.
struct NLLLossOptions {
  int64_t ignore_index = -100;
  /// kMean: over targets != ignore_index, weighted; kSum; kNone: (N) or (N, *), 0 where
  /// ignored.
  Reduction reduction = Reduction::kMean;
  /// Class weights (C), floating (undefined: all 1): position p's loss is scaled by
  /// weight[target_p], and kMean divides by the kept targets' weights summed.
  Tensor weight = Tensor();
};
/// logp (N, C) or (N, C, *) log-probabilities, target i64 or i32 (N) or (N, *) class
/// indices: -weight[t] logp[t] per position, reduced; a target outside [0, C) that is not
/// ignore_index is an error naming it (checked on the host: one wait per call on a GPU).
Tensor nll_loss(const Tensor& logp, const Tensor& target, const NLLLossOptions& o = {});

// Pointwise losses: input and target of one shape, floating, on one device; 16-bit operands
// are widened to f32, after which both must share a dtype.
/// (x - y)^2 per element, reduced.
Tensor mse_loss(const Tensor& x, const Tensor& y, Reduction reduction = Reduction::kMean);
/// |x - y| per element, reduced.
Tensor l1_loss(const Tensor& x, const Tensor& y, Reduction reduction = Reduction::kMean);
/// d = x - y: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (beta >= 0; 0 is
/// l1_loss), reduced.
Tensor smooth_l1_loss(const Tensor& x, const Tensor& y, Reduction reduction = Reduction::kMean,
                      double beta = 1.0);
/// d = x - y: 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere (delta > 0),
/// reduced.
Tensor huber_loss(const Tensor& x, const Tensor& y, Reduction reduction = Reduction::kMean,
                  double delta = 1.0);

/// torch.nn.functional.binary_cross_entropy's options.
struct BCELossOptions {
  Reduction reduction = Reduction::kMean;
  /// Scales each element's loss; broadcast to the input's shape (undefined: all 1).
  Tensor weight = Tensor();
};
/// p probabilities in [0, 1], y targets (p's shape): -(y log p + (1 - y) log(1 - p)) per
/// element, each log at least -100, then weighted and reduced. Gradient to p:
/// (p - y) / max(p (1 - p), 1e-12); to y: log(1 - p) - log p (both logs clamped). A p
/// outside [0, 1] (or NaN) is an error (checked on the host: one wait per call on a GPU).
Tensor binary_cross_entropy(const Tensor& p, const Tensor& y, const BCELossOptions& o = {});

/// torch.nn.functional.binary_cross_entropy_with_logits's options.
struct BCEWithLogitsLossOptions {
  Reduction reduction = Reduction::kMean;
  /// Scales each element's loss; broadcast to the input's shape (undefined: all 1).
  Tensor weight = Tensor();
  /// Scales the positive term, one per class (the last dim); broadcast (undefined: 1).
  Tensor pos_weight = Tensor();
};
/// x logits, y targets (x's shape): (1 - y) x - (1 + (pos_weight - 1) y) log sigmoid(x)
/// per element (stable for any x), weighted and reduced.
Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y,
                                        const BCEWithLogitsLossOptions& o = {});

/// torch.nn.functional.kl_div's options.
struct KLDivLossOptions {
  /// kBatchMean divides the sum by the batch size (dim 0): the true KL divergence per
  /// sample; kMean divides by every element. Where PyTorch would divide by 0 and return
  /// NaN (an empty batch), both are errors; so is batchmean on a 0-dim input.
  Reduction reduction = Reduction::kMean;
  /// The target holds log-probabilities rather than probabilities.
  bool log_target = false;
};
/// logp log-probabilities, target probabilities (or log-probabilities with log_target),
/// of one shape: target (log target - logp) per element (0 where target is 0), or
/// e^target (target - logp) with log_target, reduced. The gradient to a target of 0 is 0.
Tensor kl_div(const Tensor& logp, const Tensor& target, const KLDivLossOptions& o = {});

/// Inverted dropout with keep-probability 1 - p, mask from the generator.
Tensor dropout(const Tensor& x, double p, bool training, Generator& g = default_generator());

}  // namespace zt
