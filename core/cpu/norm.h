// CPU kernels for the normalization family: GroupNorm, BatchNorm and softmax along
// one dim. They are the specification a CUDA port mirrors (same names, same contract).
// Legend: N batch, C channels, S spatial elements per channel (product of *), G groups,
// R rows (outer), L the normalized length, I inner (elements after the softmax dim).
// Every tensor argument is contiguous and f32 or f64; statistics (mean, rstd) have the
// dtype of x. Sums accumulate in double; results do not depend on the thread count.
#pragma once

#include "core/tensor.h"

namespace zt::cpu {

/// y, x (N, C, S); weight, bias (C) or undefined; mean, rstd (N, G) written.
/// Per (n, g): mean and 1 / sqrt(biased var + eps) over its C/G * S elements.
void group_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, int64_t S,
                        int64_t G, double eps);

/// dy, x (N, C, S); mean, rstd (N, G) from the forward; weight (C) or undefined.
/// Writes each defined output: dx (N, C, S), dweight (C), dbias (C).
void group_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t N, int64_t C, int64_t S, int64_t G);

/// x (N, C, S) -> per-channel mean and biased variance (C), over N * S elements.
void batch_norm_stats(const Tensor& mean, const Tensor& var, const Tensor& x, int64_t N, int64_t C,
                      int64_t S);

/// y = (x - mean[c]) * rstd[c] * weight[c] + bias[c]; x, y (N, C, S); mean, rstd (C);
/// weight, bias (C) or undefined.
void batch_norm_forward(const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                        const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, int64_t S);

/// Backward of batch_norm_forward. training: mean/rstd are the batch statistics and so
/// depend on x; otherwise they are constants (running statistics).
void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t N, int64_t C, int64_t S, bool training);

/// x, y (R, L, I): softmax (or log-softmax) over L for every (r, i).
void softmax_forward(const Tensor& y, const Tensor& x, int64_t R, int64_t L, int64_t I, bool log);
/// dx from dy and the forward output y, all (R, L, I).
void softmax_backward(const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t R, int64_t L,
                      int64_t I, bool log);

}  // namespace zt::cpu
