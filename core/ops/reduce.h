// Reductions over given dims (or all dims when `dims` is empty).
#pragma once

#include "core/tensor.h"

namespace zt {

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Variance; unbiased divides by n - 1.
Tensor var(const Tensor& a, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);
/// Max/min over one dim (gradient flows to the first extremal element) or all.
Tensor max(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
/// Indices (i64) of the first max/min along dim; no gradient.
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);
/// p-norm (p = 2 by default) over dims or all.
Tensor norm(const Tensor& a, double p = 2.0, const std::vector<int64_t>& dims = {},
            bool keepdim = false);

}  // namespace zt
