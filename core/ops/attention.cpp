// scaled_dot_product_attention: scores = q k^T by one batched GEMM, the attention
// softmax kernel applies the scale and causal mask in place (core/cpu/attention.cpp,
// core/cuda/attention.cu), out = p v by a second one. Backward with p saved:
//   dv = p^T g,  dp = g v^T,  ds = softmax_backward(dp, p),  dq = scale ds k,
//   dk = scale ds^T q.
// Masked entries of p are exactly 0, so softmax_backward gives them 0 gradient.
// The fused path (flash_attention below) saves q, k, v, the output and each row's
// log-sum-exp instead; its kernels recompute the probabilities tile by tile.
// Legend: B flattened leading dims, Tq queries, Tk keys, D query/key dim, Dv value dim.
#include "core/ops/attention.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <utility>
#include <vector>

#include "core/autograd.h"
#include "core/cuda/flash_params.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {

AttentionKernel kernel_from_env() {
  const char* v = std::getenv("ZT_ATTENTION");
  if (v == nullptr || *v == '\0') return AttentionKernel::automatic;
  try {
    return parse_attention_kernel(v);
  } catch (const Error& e) {
    ZT_FAIL("environment variable ZT_ATTENTION: ", e.what());
  }
}

std::atomic<AttentionKernel>& kernel_choice() {
  static std::atomic<AttentionKernel> choice{kernel_from_env()};
  return choice;
}

bool use_flash(const Tensor& q, const Tensor& k, const Tensor& v) {
  return fused_attention_applies(q.device(), q.dtype(), q.size(-1)) && q.dim() <= 4 &&
         v.size(-1) == q.size(-1) && q.size(-2) > 0 && k.size(-2) > 0 && flash::layout_ok(q) &&
         flash::layout_ok(k) && flash::layout_ok(v);
}

// An empty tensor shaped like t whose dims lie in memory in the order of t's strides
// (largest first; the last dim stays innermost), so results keep their inputs' layout.
Tensor empty_in_layout_of(const Tensor& t) {
  const auto n = static_cast<size_t>(t.dim());
  std::vector<int64_t> order(n), inverse(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end() - 1,
                   [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  Shape sizes;
  for (size_t i = 0; i < n; ++i) {
    sizes.push_back(t.size(order[i]));
    inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  }
  return Tensor::empty(sizes, t.dtype(), t.device()).permute(inverse);
}

// Whether three views with t's sizes and strides at offsets 0, step and 2 step are
// disjoint the way a split of the last dim leaves them: the dims strided below `step`
// (the last one, the heads) place single elements without overlap within one block of at
// most `step` elements, and the others place those blocks at least 3 step apart; in both,
// each stride lies past all the smaller ones' reach, so no element is reached twice (a
// broadcast dim, stride 0, reaches its first element again).
bool disjoint_at_steps(const Tensor& t, int64_t step) {
  std::vector<std::pair<int64_t, int64_t>> inner, outer;  // (stride, size)
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) <= 1) continue;
    (t.stride(d) < step ? inner : outer).emplace_back(t.stride(d), t.size(d));
  }
  // The reach after the dims, from `reach` (what one position spans), or -1 on overlap.
  auto reach_of = [](std::vector<std::pair<int64_t, int64_t>>& dims, int64_t reach) {
    std::sort(dims.begin(), dims.end());
    for (const auto& [stride, size] : dims) {
      if (stride < reach) return int64_t{-1};
      reach += (size - 1) * stride;
    }
    return reach;
  };
  const int64_t block = reach_of(inner, 1);
  return block > 0 && block <= step && reach_of(outer, 3 * step) > 0;
}

// Buffers for the gradients of q, k and v, each in its input's layout. When q, k and v
// are packed (views of one storage with one shape and strides, k as far past q as v past
// k, disjoint as a split of the last dim leaves them: the heads of one fused q/k/v
// projection), the three share one buffer at the same relative places, so that split()'s
// backward hands that buffer on whole, with no copy, as the projection's output gradient.
std::array<Tensor, 3> gradient_buffers(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t step = k.offset() - q.offset();
  const bool packed = q.has_storage() && q.storage() == k.storage() && q.storage() == v.storage() &&
                      q.sizes() == k.sizes() && q.sizes() == v.sizes() &&
                      q.strides() == k.strides() && q.strides() == v.strides() && step > 0 &&
                      v.offset() - k.offset() == step && q.numel() > 0 &&
                      disjoint_at_steps(q, step);
  if (!packed) return {empty_in_layout_of(q), empty_in_layout_of(k), empty_in_layout_of(v)};
  int64_t extent = 1;  // elements from a view's first to its last, inclusive
  for (int64_t d = 0; d < q.dim(); ++d) extent += (q.size(d) - 1) * q.stride(d);
  const Tensor buffer = Tensor::empty({2 * step + extent}, q.dtype(), q.device());
  return {buffer.as_strided(q.sizes(), q.strides(), 0),
          buffer.as_strided(q.sizes(), q.strides(), step),
          buffer.as_strided(q.sizes(), q.strides(), 2 * step)};
}

// (..., T, D) with at most two leading dims as the kernels' (n0, n1, T, D) view.
Tensor as_4d(Tensor t) {
  while (t.dim() < 4) t = t.unsqueeze(0);
  return t;
}

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double s) {
  const Device dev = q.device();
  const Tensor out = empty_in_layout_of(q.detach());
  // The kernels' (n0, n1, T, D) views, kept for the backward.
  const Tensor q4 = as_4d(q.detach()), k4 = as_4d(k.detach()), v4 = as_4d(v.detach()),
               o4 = as_4d(out.detach());
  const Tensor lse = Tensor::empty({q4.size(0), q4.size(1), q4.size(2)}, DType::f32, dev);
  ZT_DISPATCH(dev, flash_attention_forward, o4, lse, q4, k4, v4, s, causal);
  if (!autograd::needs_grad({q, k, v})) return out;
  const bool gq = q.requires_grad(), gk = k.requires_grad(), gv = v.requires_grad();
  const Shape qs = q.sizes(), ks = k.sizes(), vs = v.sizes();
  autograd::record("scaled_dot_product_attention", {q, k, v}, {out},
                   [=](const std::vector<Tensor>& g) {
                     // A fresh copy when needed: a contiguous gradient may still start mid-row
                     // (cat's backward hands out narrowed views).
                     const Tensor dout = flash::layout_ok(g[0]) ? g[0] : g[0].clone();
                     // References, not a structured binding: the dispatch below captures
                     // them in a lambda, which clang before 16 refuses for a binding.
                     const std::array<Tensor, 3> buffers = gradient_buffers(q4, k4, v4);
                     const Tensor &dq = buffers[0], &dk = buffers[1], &dv = buffers[2];
                     const Tensor delta = Tensor::empty(lse.sizes(), DType::f32, dev);
                     ZT_DISPATCH(dev, flash_attention_backward, dq, dk, dv, delta, q4, k4, v4, o4,
                                 as_4d(dout), lse, s, causal);
                     return std::vector<Tensor>{gq ? dq.view(qs) : Tensor(),
                                                gk ? dk.view(ks) : Tensor(),
                                                gv ? dv.view(vs) : Tensor()};
                   },
                   {q4, k4, v4, o4});
  return out;
}

// The softmax's dtype: f64 stays f64, everything else runs in f32.
DType softmax_dtype(DType dt) {
  return dt == DType::f64 ? DType::f64 : DType::f32;
}

Tensor as_dtype(const Tensor& t, DType dt) {
  return t.dtype() == dt ? t : t.to(dt);
}

// alpha a b (B, M, N) for a (B, M, K), b (B, K, N), laid out as `like` (B, M, N): in
// its transpose's rows when like is a transposed view (unit stride down its columns, as
// the tokens of a permuted (N, C, HW) feature map), else contiguous. So the GEMM path's
// output and gradients keep their inputs' layouts, as the fused path's do, and a feature
// map's convolutions read them without a copy.
Tensor bmm_in_layout_of(const Tensor& like, const Tensor& a, const Tensor& b, double alpha = 1.0) {
  const int64_t B = a.size(0), M = a.size(1), N = b.size(2);
  if (M > 1 && N > 1 && like.stride(1) == 1 && like.stride(2) != 1) {
    Tensor t = Tensor::empty({B, N, M}, a.dtype(), a.device());
    bmm_into(t, b.transpose(1, 2), a.transpose(1, 2), alpha);
    return t.transpose(1, 2);
  }
  Tensor out = Tensor::empty({B, M, N}, a.dtype(), a.device());
  bmm_into(out, a, b, alpha);
  return out;
}

// The composed path: scores = scale q k^T (a batched GEMM in q's dtype), the (causal)
// softmax in softmax_dtype, then p v; the backward is the same GEMMs and
// softmax_backward. q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv), already checked.
Tensor math_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double s) {
  const int64_t Tq = q.size(-2), D = q.size(-1), Tk = k.size(-2), Dv = v.size(-1);
  const int64_t B = shape_numel(Shape(q.sizes().begin(), q.sizes().end() - 2));
  const DType dt = q.dtype(), st = softmax_dtype(dt);
  const Device dev = q.device();

  Tensor q3 = q.detach().reshape({B, Tq, D}), k3 = k.detach().reshape({B, Tk, D}),
         v3 = v.detach().reshape({B, Tk, Dv});
  // Scaled inside the GEMM, before its result is rounded to q's dtype: the unscaled
  // products of f16 heads overflow from |q||k| > 65504 (e.g. 40s over 64 dims).
  Tensor scores = Tensor::empty({B, Tq, Tk}, dt, dev);
  bmm_into(scores, q3, k3.transpose(1, 2), s);
  Tensor p = as_dtype(scores, st);
  if (Tk > 0) ZT_DISPATCH(dev, attention_softmax_forward, p, p, B * Tq, Tk, 1.0, causal);
  Tensor pd = as_dtype(p, dt);
  Tensor out3 = bmm_in_layout_of(q3, pd, v3);
  Shape os = q.sizes();
  os.back() = Dv;
  Tensor out = out3.view(os);

  if (autograd::needs_grad({q, k, v})) {
    const bool gq = q.requires_grad(), gk = k.requires_grad(), gv = v.requires_grad();
    const Shape qs = q.sizes(), ks = k.sizes(), vs = v.sizes();
    autograd::record("scaled_dot_product_attention", {q, k, v}, {out},
                     [=](const std::vector<Tensor>& g) {
                       Tensor g3 = g[0].reshape({B, Tq, Dv});
                       Tensor dq, dk, dv;
                       if (gv) dv = bmm_in_layout_of(v3, pd.transpose(1, 2), g3).view(vs);
                       if (gq || gk) {
                         // In f32 for f16: a loss-scaled g times v overflows its range.
                         const DType dpt = dt == DType::f16 ? st : dt;
                         Tensor dp = Tensor::empty({B, Tq, Tk}, dpt, dev);
                         bmm_into(dp, as_dtype(g3, dpt), as_dtype(v3, dpt).transpose(1, 2));
                         dp = as_dtype(dp, st);
                         Tensor ds = Tensor::empty({B, Tq, Tk}, st, dev);
                         if (Tk > 0)
                           ZT_DISPATCH(dev, softmax_backward, ds, dp, p, B * Tq, Tk, 1, false);
                         ds = as_dtype(ds, dt);
                         if (gq) dq = bmm_in_layout_of(q3, ds, k3, s).view(qs);
                         if (gk) dk = bmm_in_layout_of(k3, ds.transpose(1, 2), q3, s).view(ks);
                       }
                       return std::vector<Tensor>{dq, dk, dv};
                     },
                     {q3, k3, v3});
  }
  return out;
}

}  // namespace

bool fused_attention_applies(Device device, DType dtype, int64_t head_dim) {
  const AttentionKernel mode = attention_kernel();
  if (mode == AttentionKernel::math || (mode == AttentionKernel::automatic && !device.is_cuda()))
    return false;
  return is_16bit_float(dtype) && flash::head_dim_supported(head_dim);
}

AttentionKernel attention_kernel() {
  return kernel_choice().load(std::memory_order_relaxed);
}

void set_attention_kernel(AttentionKernel kernel) {
  kernel_choice().store(kernel, std::memory_order_relaxed);
}

const char* attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::automatic:
      return "auto";
    case AttentionKernel::flash:
      return "flash";
    case AttentionKernel::math:
      return "math";
  }
  return "?";
}

AttentionKernel parse_attention_kernel(const std::string& name) {
  for (AttentionKernel k :
       {AttentionKernel::automatic, AttentionKernel::flash, AttentionKernel::math})
    if (name == attention_kernel_name(k)) return k;
  ZT_FAIL("unknown attention kernel '", name, "' (expected auto, flash or math)");
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<double> scale) {
  constexpr const char* op = "scaled_dot_product_attention";
  detail::check_same(op, {q, k, v});
  ZT_CHECK(is_floating(q.dtype()), op, ": expected floating tensors, got ", dtype_name(q.dtype()));
  ZT_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), op,
           ": q, k, v must be (..., T, D) with the same number of dims, got ", shape_str(q.sizes()),
           ", ", shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  const Shape lead(q.sizes().begin(), q.sizes().end() - 2);
  ZT_CHECK(Shape(k.sizes().begin(), k.sizes().end() - 2) == lead &&
               Shape(v.sizes().begin(), v.sizes().end() - 2) == lead,
           op, ": leading dims of q ", shape_str(q.sizes()), ", k ", shape_str(k.sizes()),
           " and v ", shape_str(v.sizes()), " differ (no broadcasting; expand them first)");
  const int64_t Tq = q.size(-2), D = q.size(-1), Tk = k.size(-2);
  ZT_CHECK(k.size(-1) == D && v.size(-2) == Tk, op, ": k ", shape_str(k.sizes()),
           " must be (..., Tk, ", D, ") and v ", shape_str(v.sizes()), " (..., ", Tk, ", Dv)");
  ZT_CHECK(!causal || Tq == Tk, op, ": causal attention needs as many queries as keys, got ", Tq,
           " and ", Tk);
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(D, 1)));
  if (use_flash(q, k, v)) return flash_attention(q, k, v, causal, s);
  return math_attention(q, k, v, causal, s);
}

}  // namespace zt
