// Gradient clipping by global L2 norm, split in two so a sharded engine can sum the
// per-rank squared norms before scaling: clip = scale_grads(grads, c) with
// c = min(1, max_norm / (sqrt(sum over ranks of grad_norm_sq) + 1e-6)).
// The tensor forms keep the norm and the coefficient on the gradients' device, so a GPU
// step clips without waiting for the GPU (the host reads the norm only when it logs it).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace zt::optim {

/// Sum of squares of every element of every defined gradient, accumulated in double.
double grad_norm_sq(const std::vector<Tensor>& grads);
/// grad_norm_sq as a one-element f64 tensor on `device`, summed there: each gradient by
/// core's sum_squares (squares in double, no temporary of the gradient's size), CPU ones
/// on the host, the others on their device without a read back to the host.
Tensor grad_norm_sq_on(const std::vector<Tensor>& grads, Device device);
/// Multiplies every defined gradient by `scale` in place.
void scale_grads(const std::vector<Tensor>& grads, double scale);
/// Multiplies every defined gradient in place by the one-element tensor `scale` (on the
/// gradients' device; cast to each gradient's dtype there). A CPU scale of exactly 1 is
/// skipped (it would not change a bit).
void scale_grads(const std::vector<Tensor>& grads, const Tensor& scale);
/// The clip coefficient PyTorch uses: min(1, max_norm / (total_norm + 1e-6)). max_norm
/// must be > 0 here and in every form below: torch takes 0 (every gradient zeroed) and
/// negative values (gradients flipped), which a clipping setting never means.
double clip_coefficient(double total_norm, double max_norm);
/// The same coefficient computed on total_norm's device from a one-element f64 tensor
/// (a NaN norm gives 1, as the double form does).
Tensor clip_coefficient(const Tensor& total_norm, double max_norm);
/// Clips the parameters' gradients to global norm `max_norm` (as
/// torch.nn.utils.clip_grad_norm_) and returns the norm before clipping. An infinite norm
/// scales finite gradients to 0, as torch does; a NaN norm leaves every gradient as it is,
/// where torch's would all become NaN.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace zt::optim
