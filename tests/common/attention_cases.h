// Shared by the CPU and CUDA tests of gemm_batched and scaled_dot_product_attention:
// batched operands in the layouts the batched GEMM reads in place (transposed, padded
// leading dims, gaps between matrices, one matrix expanded over the batch) and the
// composed attention reference (matmul, an additive -inf mask tensor, softmax).
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/test_util.h"
#include "core/cuda/flash_shapes.h"
#include "core/kernel_profile.h"
#include "core/kernels.h"
#include "core/ops.h"
#include "core/ops/attention.h"

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

/// Sets scaled_dot_product_attention's kernel for a scope.
class AttentionKernelScope {
 public:
  explicit AttentionKernelScope(AttentionKernel k) : before_(attention_kernel()) {
    set_attention_kernel(k);
  }
  ~AttentionKernelScope() { set_attention_kernel(before_); }
  AttentionKernelScope(const AttentionKernelScope&) = delete;
  AttentionKernelScope& operator=(const AttentionKernelScope&) = delete;

 private:
  AttentionKernel before_;
};

/// Sets the fused kernels' tile shapes for a scope (flash::set_tile_shape; {}: the head
/// dim's default), the forward's, dq's and dk / dv's.
class TileShapeScope {
 public:
  TileShapeScope(flash::TileShape forward, flash::TileShape dq, flash::TileShape dkdv) {
    const flash::TileShape shapes[] = {forward, dq, dkdv};
    for (int i = 0; i < 3; ++i) {
      before_[i] = flash::tile_shape_set(kPasses[i]);
      flash::set_tile_shape(kPasses[i], shapes[i]);
    }
  }
  ~TileShapeScope() {
    for (int i = 0; i < 3; ++i) flash::set_tile_shape(kPasses[i], before_[i]);
  }
  TileShapeScope(const TileShapeScope&) = delete;
  TileShapeScope& operator=(const TileShapeScope&) = delete;

 private:
  static constexpr flash::Pass kPasses[] = {flash::Pass::forward, flash::Pass::dq,
                                            flash::Pass::dkdv};
  flash::TileShape before_[3];
};

/// Sets the fused backward's way to dq (flash::set_backward) for its lifetime.
class FlashBackwardScope {
 public:
  explicit FlashBackwardScope(flash::Backward b) : before_(flash::backward()) {
    flash::set_backward(b);
  }
  ~FlashBackwardScope() { flash::set_backward(before_); }
  FlashBackwardScope(const FlashBackwardScope&) = delete;
  FlashBackwardScope& operator=(const FlashBackwardScope&) = delete;

 private:
  flash::Backward before_;
};

/// scaled_dot_product_attention's output and its inputs' gradients.
struct AttentionGrads {
  Tensor out, dq, dk, dv;
};

/// Runs attention under `kernel` on leaves copied from q, k, v, each passed through
/// `view` first (a layout such as the heads' permute), then backward with a seeded
/// upstream gradient (normals rounded to bf16, so every dtype sees the same numbers).
inline AttentionGrads attention_grads(
    AttentionKernel kernel, const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
    const std::function<Tensor(const Tensor&)>& view = [](const Tensor& t) { return t; }) {
  AttentionKernelScope scope(kernel);
  std::vector<Tensor> leaves;
  for (const Tensor& t : {q, k, v}) {
    Tensor l = t.clone().detach();
    l.set_requires_grad(true);
    leaves.push_back(l);
  }
  Tensor out =
      scaled_dot_product_attention(view(leaves[0]), view(leaves[1]), view(leaves[2]), causal);
  Generator g(7);
  out.backward(randn(out.sizes(), g, DType::f64).to(DType::bf16).to(out.dtype()).to(out.device()));
  return {out.detach(), leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
}

/// The gradient that reaches a (B, T, 3E) q/k/v projection's output `qkv` (nn::
/// MultiheadSelfAttention's fused_qkv) through causal fused attention over `heads` heads,
/// with q, k and v split from it as views (packed) or copied apart; `copies` counts the
/// copy kernels of the backward.
inline Tensor qkv_projection_gradient(const Tensor& qkv, int64_t heads, bool packed,
                                      int64_t* copies) {
  const int64_t b = qkv.size(0), t = qkv.size(1), e = qkv.size(2) / 3, d = e / heads;
  AttentionKernelScope scope(AttentionKernel::flash);
  const Tensor leaf = qkv.clone().set_requires_grad(true);
  Tensor seen;  // what reaches the projection's output, seen by an identity op
  const Tensor spied = autograd::apply_function(
      "spy", {leaf}, [](const std::vector<Tensor>& in) { return in; },
      [&seen](const std::vector<Tensor>& g) {
        seen = g[0];
        return g;
      })[0];
  std::vector<Tensor> qkv_heads;
  for (const Tensor& part : split(spied, e, 2))
    qkv_heads.push_back(
        (packed ? part : part.contiguous()).reshape({b, t, heads, d}).permute({0, 2, 1, 3}));
  const Tensor out = scaled_dot_product_attention(qkv_heads[0], qkv_heads[1], qkv_heads[2], true);
  Generator g(6);
  const Tensor upstream = randn(out.sizes(), g, DType::f64).to(out.dtype()).to(out.device());
  KernelProfile profile;
  out.backward(upstream);
  *copies = 0;
  for (const KernelProfile::Entry& entry : profile.totals())
    if (entry.kernel == "copy") *copies += entry.calls;
  return seen;
}

/// q, k and v split from one projection's output get their gradients in one buffer at the
/// same places (the fused attention's backward), and split() hands that buffer to the
/// projection as it is: the same bits as q, k and v copied apart, without the three copies
/// that join separate buffers.
inline void expect_packed_qkv_gradient_whole(const Tensor& qkv, int64_t heads) {
  FlashBackwardScope split(flash::Backward::split);  // the same bits on both sides
  int64_t packed_copies = -1, apart_copies = -1;
  const Tensor packed = qkv_projection_gradient(qkv, heads, true, &packed_copies);
  const Tensor apart = qkv_projection_gradient(qkv, heads, false, &apart_copies);
  EXPECT_TRUE(all_close(packed, apart, 0.0, 0.0));
  EXPECT_EQ(apart_copies - packed_copies, 3) << "split's three copies into the joint gradient";
}

/// Whether fn dispatched the fused attention kernels (forward and backward both).
inline bool runs_fused(const std::function<void()>& fn) {
  KernelProfile profile;
  fn();
  bool forward = false, backward = false;
  for (const KernelProfile::Entry& e : profile.totals()) {
    forward = forward || e.kernel == "flash_attention_forward";
    backward = backward || e.kernel == "flash_attention_backward";
  }
  return forward && backward;
}

/// |a - b| / |b| in the 2-norm, computed in f64 on the host.
inline double relative_error(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(Device::cpu()).to(DType::f64), b64 = b.to(Device::cpu()).to(DType::f64);
  return std::sqrt(sum_squares(sub(a64, b64)).item() / sum_squares(b64).item());
}

/// The fused kernels' tolerance against f32 (relative, 2-norm): their 16-bit roundings
/// of results and probabilities measure 2e-3 .. 3e-3 in bf16 and 2e-4 .. 4e-4 in f16.
inline double flash_tolerance(DType dt) {
  return dt == DType::bf16 ? 6e-3 : 8e-4;
}

/// Output and every gradient within `tol` of `want` in relative_error.
inline ::testing::AssertionResult grads_close(const AttentionGrads& got, const AttentionGrads& want,
                                              double tol) {
  const std::pair<const char*, double> errs[] = {{"output", relative_error(got.out, want.out)},
                                                 {"dq", relative_error(got.dq, want.dq)},
                                                 {"dk", relative_error(got.dk, want.dk)},
                                                 {"dv", relative_error(got.dv, want.dv)}};
  for (const auto& [name, err] : errs)
    if (!(err < tol))
      return ::testing::AssertionFailure() << name << ": relative error " << err << " > " << tol;
  return ::testing::AssertionSuccess();
}

}  // namespace zt::test
