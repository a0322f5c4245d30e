// Gradient clipping by global L2 norm, split in two so a sharded engine can sum the
// per-rank squared norms before scaling: clip = scale_grads(grads, c) with
// c = min(1, max_norm / (sqrt(sum over ranks of grad_norm_sq) + 1e-6)).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace zt::optim {

/// Sum of squares of every element of every defined gradient, accumulated in double.
double grad_norm_sq(const std::vector<Tensor>& grads);
/// Multiplies every defined gradient by `scale` in place.
void scale_grads(const std::vector<Tensor>& grads, double scale);
/// The clip coefficient PyTorch uses: min(1, max_norm / (total_norm + 1e-6)).
double clip_coefficient(double total_norm, double max_norm);
/// Clips the parameters' gradients to global norm `max_norm` (as
/// torch.nn.utils.clip_grad_norm_) and returns the norm before clipping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace zt::optim
