// Reductions over given dims (or all dims when `dims` is empty).
#pragma once

#include "core/tensor.h"

namespace zt {

/// Sum over dims in a's dtype, accumulated in double in a fixed order (the result does
/// not depend on the thread count); 0 over an empty dim.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Mean over dims; 16-bit inputs are averaged in f32 and rounded once. Errors when the
/// reduced dims hold no elements.
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Variance; unbiased divides by n - 1 (needs n >= 2). 16-bit inputs are computed in f32.
Tensor var(const Tensor& a, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);
/// Max/min over one dim (gradient flows to the first extremal element) or all (gradient
/// spread evenly over the elements equal to the result, as PyTorch's); a NaN is both
/// (argmax).
/// Values of the max along dim (a's shape without dim, or 1 there with keepdim).
Tensor max(const Tensor& a, int64_t dim, bool keepdim = false);
/// Values of the min along dim (a's shape without dim, or 1 there with keepdim).
Tensor min(const Tensor& a, int64_t dim, bool keepdim = false);
/// The max of all elements, a 0-dim tensor.
Tensor max(const Tensor& a);
/// The min of all elements, a 0-dim tensor.
Tensor min(const Tensor& a);
/// Indices (i64) of the first max along dim, a NaN counting as both max and min (the
/// first NaN, as PyTorch's); no gradient. Errors on an empty dim.
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
/// Indices (i64) of the first min along dim, with argmax's NaN rule; no gradient.
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);
/// p-norm (p = 2 by default) over dims or all.
Tensor norm(const Tensor& a, double p = 2.0, const std::vector<int64_t>& dims = {},
            bool keepdim = false);
/// Sum of the squares of every element of a floating tensor (f32, f64, bf16 or f16), each
/// converted to double before squaring and summed in double: a one-element f64 tensor
/// (shape {1}) on a's device, 0 for an empty a. One read of a (made contiguous first if
/// it is not), with no temporary of its size; on a GPU nothing is read back or waited on.
/// Not differentiable: no gradient is recorded (for one, use sum(mul(a, a))). The CPU
/// result does not depend on the thread count; see the sum_squares kernel
/// (core/kernel_list.h) for each device's order of additions.
Tensor sum_squares(const Tensor& a);

}  // namespace zt
