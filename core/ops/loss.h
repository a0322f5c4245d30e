// Softmax family, losses and dropout.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace zt {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
/// logits (N, C) or (N, C, *) of any floating dtype, target i64 or i32 (N) or (N, *); mean
/// over targets != ignore_index (NaN when all are ignored), in the logits' dtype. Fused:
/// nothing of the logits' size is stored beyond the logits themselves ((N, C, *) logits
/// are first copied class-last) and the gradient (one tensor like the logits).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100);
/// Mean squared error, mean reduction.
Tensor mse_loss(const Tensor& x, const Tensor& y);
/// Mean absolute error, mean reduction.
Tensor l1_loss(const Tensor& x, const Tensor& y);
/// Inverted dropout with keep-probability 1 - p, mask from the generator.
Tensor dropout(const Tensor& x, double p, bool training, Generator& g = default_generator());

}  // namespace zt
