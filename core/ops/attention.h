// Scaled dot-product attention as one op: two batched GEMMs around a fused scale /
// causal-mask / softmax kernel, forward and backward, with no per-head or per-sample
// loops and no mask tensor.
// Legend: ... leading (batch, head) dims, flattened to B; Tq queries, Tk keys, D the
// query/key dim, Dv the value dim.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace zt {

/// softmax(scale * q @ k^T [causal mask]) @ v for q (..., Tq, D), k (..., Tk, D) and
/// v (..., Tk, Dv) with the same leading dims (any number, none included) -> (..., Tq,
/// Dv). causal: query i sees keys j <= i only (needs Tq == Tk). scale defaults to
/// 1 / sqrt(D). Inputs may be strided views (transposed matrices and a regular batch
/// stride are read in place; other layouts are copied). f32 and f64; bf16 and f16
/// multiply in their dtype and take the softmax in f32. Differentiable in q, k and v.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace zt
