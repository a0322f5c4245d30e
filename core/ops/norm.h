// Normalization ops. Legend: N batch, C channels, * spatial dims, G groups.
#pragma once

#include "core/tensor.h"

namespace zt {

/// What group_norm applies after its affine n = xhat * weight + bias, in the same kernels:
/// y = n * scale + shift where scale and shift are given (both, of x's shape, dtype and
/// device: a spatially modulated norm), then y = silu(y) if `silu`. One kernel each way
/// where the composed ops took three to five; the backward recomputes n instead of saving
/// it. (16-bit inputs: the epilogue runs in f32 before the one rounding.)
struct GroupNormEpilogue {
  Tensor scale, shift;
  bool silu = false;
  bool active() const { return scale.defined() || silu; }
};

/// x (N, C, *), weight/bias (C) or undefined, G groups dividing C; then the epilogue.
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias,
                  double eps = 1e-5, const GroupNormEpilogue& epilogue = {});

/// x (N, C, *). training: normalize with batch statistics over (N, *), and if running
/// stats are given update them in place: r = (1 - momentum) r + momentum * stat, the
/// variance unbiased (PyTorch semantics). eval: use the running statistics. The running
/// statistics: both or neither, contiguous, of C elements and one floating dtype (any:
/// each is updated in its own, the update computed in double; bf16/f16 round twice,
/// double to float to 16 bits, on the CPU and the GPU alike). num_batches_tracked (an
/// i64 scalar on x's device; training with running statistics only) is incremented by
/// one in the statistics' kernel, as nn::BatchNorm counts its updates. Training takes
/// more than one value per channel, or none (an empty batch, as PyTorch's: an empty
/// output, the running statistics left, the counter counted).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps, const Tensor& num_batches_tracked = Tensor());

/// x (..., D) normalized over the last dims given by `normalized_shape`, then
/// weight * xhat + bias (each optional, shaped `normalized_shape`, x's dtype). One fused
/// kernel each way; bf16/f16 inputs are normalized in f32 and rounded once.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps = 1e-5);
/// x (..., D): x / sqrt(mean(x^2) + eps) * weight.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                double eps = 1e-6);

}  // namespace zt
