// Shared by the CPU and CUDA tests of gemm_batched and scaled_dot_product_attention:
// batched operands in the layouts the batched GEMM reads in place (transposed, padded
// leading dims, gaps between matrices, one matrix expanded over the batch) and the
// composed attention reference (matmul, an additive -inf mask tensor, softmax).
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels.h"
#include "core/ops.h"

namespace zt::test {

/// How a (B, R, C) operand lies in memory.
struct Layout {
  bool trans = false;   // columns contiguous (a transposed view)
  int64_t pad = 0;      // extra elements per row (or column) beyond the matrix
  int64_t step = 1;     // every step-th matrix of a larger batch
  bool expand = false;  // one matrix repeated over the batch (batch stride 0)
};

/// A (B, R, C) view with `layout` over seeded normals (drawn in f64, rounded to dt),
/// built on `dev` so the strides survive.
inline Tensor strided_operand(int64_t B, int64_t R, int64_t C, const Layout& layout, uint64_t seed,
                              DType dt, Device dev = Device::cpu()) {
  const int64_t nb = layout.expand ? 1 : B * layout.step;
  const Shape s = layout.trans ? Shape{nb, C, R + layout.pad} : Shape{nb, R, C + layout.pad};
  Generator g(seed);
  Tensor t = randn(s, g, DType::f64).to(dt).to(dev);
  t = t.narrow(2, 0, layout.trans ? R : C);
  if (layout.trans) t = t.transpose(1, 2);
  if (layout.expand) return t.expand({B, R, C});
  return t.slice(0, 0, B * layout.step, layout.step);
}

/// gemm_batched's (trans, ld, batch stride) for a view made by strided_operand.
struct BlasView {
  bool trans;
  int64_t ld, stride;
};
inline BlasView blas_view(const Tensor& t, const Layout& layout) {
  return {layout.trans, layout.trans ? t.stride(2) : t.stride(1), t.stride(0)};
}

/// The composed reference: matmul(softmax(scale q k^T + mask), v), the mask an additive
/// (Tq, Tk) tensor of 0 / -inf built on the host.
inline Tensor reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                  double scale) {
  Tensor s = mul(matmul(q, k.transpose(-2, -1)), scale);
  if (causal) {
    const int64_t t = q.size(-2);
    std::vector<double> mask(static_cast<size_t>(t * t), 0.0);
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = i + 1; j < t; ++j)
        mask[static_cast<size_t>(i * t + j)] = -std::numeric_limits<double>::infinity();
    s = add(s, from_vector(mask, {t, t}, s.dtype(), s.device()));
  }
  return matmul(softmax(s, -1), v);
}

}  // namespace zt::test
