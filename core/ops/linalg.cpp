// matmul / bmm on top of one GEMM entry point (BLAS on CPU, cuBLAS on GPU); linear and
// linear_gelu on the GEMM with a fused bias / GELU epilogue (cuBLASLt on GPU).
#include "core/ops/linalg.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {
// BLAS and cuBLAS take 32-bit leading dims: a wider one is copied contiguous.
constexpr int64_t kMaxLd = INT32_MAX;

// A (B, R, C) operand as (data, leading dim, transposed, batch stride): in place when
// its matrices are BLAS-compatible, else a contiguous copy.
struct BatchedOperand {
  Tensor t;
  int64_t ld;
  bool trans;
  int64_t stride;
};
BatchedOperand as_batched_operand(const Tensor& x) {
  int64_t r = x.size(1), c = x.size(2), sb = x.size(0) > 1 ? x.stride(0) : 0;
  if (x.stride(2) == 1 && x.stride(1) >= std::max<int64_t>(c, 1) && x.stride(1) <= kMaxLd)
    return {x, x.stride(1), false, sb};
  if (x.stride(1) == 1 && x.stride(2) >= std::max<int64_t>(r, 1) && x.stride(2) <= kMaxLd)
    return {x, x.stride(2), true, sb};
  Tensor y = x.contiguous();
  return {y, std::max<int64_t>(c, 1), false, r * c};
}

// A 2-D operand as (data, leading dim, transposed) without copying when its strides
// are BLAS-compatible: a batch of one.
struct GemmOperand {
  Tensor t;
  int64_t ld;
  bool trans;
};
GemmOperand as_gemm_operand(const Tensor& x) {
  const BatchedOperand b = as_batched_operand(x.detach().unsqueeze(0));
  return {b.t.squeeze(0), b.ld, b.trans};
}

// out (M, N) = a (M, K) @ b (K, N), both 2-D, no autograd.
void mm_into(const Tensor& out, const Tensor& a, const Tensor& b, double beta = 0.0) {
  GemmOperand A = as_gemm_operand(a), B = as_gemm_operand(b);
  gemm(A.trans, B.trans, a.size(0), b.size(1), a.size(1), 1.0, A.t, A.ld, B.t, B.ld, beta, out,
       std::max<int64_t>(out.size(1), 1));
}

// A GEMM reads each operand element for many outputs, some of them after it wrote others
// (in an order BLAS's blocking picks): an output in an operand's memory, even as the very
// same elements, would be read back as written.
void check_output_apart(const char* op, const Tensor& c, const Tensor& a, const Tensor& b) {
  for (const auto& [t, name] : {std::pair{&a, "A"}, std::pair{&b, "B"}})
    ZT_CHECK(!detail::shares_memory(c, *t), op, ": the output ", c.str(),
             " shares memory with operand ", name, ", ", t->str(),
             ", which the product reads after writing to it; write to another tensor (a "
             "clone() of the operand, or a fresh output)");
}

Tensor mm_raw(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty({a.size(0), b.size(1)}, a.dtype(), a.device());
  if (a.size(1) == 0) {
    out.zero_();
    return out;
  }
  mm_into(out, a, b);
  return out;
}

// Batched a (B, M, K) @ b (B, K, N), no autograd.
Tensor bmm_raw(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty({a.size(0), a.size(1), b.size(2)}, a.dtype(), a.device());
  bmm_into(out, a, b);
  return out;
}
}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, double beta, const Tensor& c,
          int64_t ldc) {
  detail::check_same("gemm", {a, b, c});
  // Each operand as the kernels read it (the BLAS ones through its leading dimension, the
  // 16-bit ones through its view): the (rows, cols) view of op(X), whose stored matrix
  // has rows `ld` elements apart and adjacent elements, so both readings agree and stay
  // inside the tensor.
  auto check = [](const char* what, const Tensor& t, int64_t rows, int64_t cols, bool trans,
                  int64_t ld) {
    const int64_t row_stride = trans ? t.stride(1) : t.stride(0);
    const int64_t elem_stride = trans ? t.stride(0) : t.stride(1);
    const int64_t stored_rows = trans ? cols : rows, stored_cols = trans ? rows : cols;
    ZT_CHECK(t.dim() == 2 && t.size(0) == rows && t.size(1) == cols &&
                 ld >= std::max<int64_t>(stored_cols, 1) &&
                 (stored_rows <= 1 || row_stride == ld) && (stored_cols <= 1 || elem_stride == 1),
             "gemm: ", what, " must be the ", rows, "x", cols, " view of op(", what,
             ") whose stored ", stored_rows, "x", stored_cols, " matrix has rows ", ld,
             " elements apart (its leading dimension) and adjacent elements; got ", t.str(),
             " with strides ", shape_str(t.strides()));
  };
  check("A", a, m, k, trans_a, lda);
  check("B", b, k, n, trans_b, ldb);
  check("C", c, m, n, false, ldc);
  check_output_apart("gemm", c, a, b);
  // The sources too: a gradient to a or b would be lost (autograd records no write).
  detail::begin_write("gemm", c, {a, b});
  ZT_DISPATCH(c.device(), gemm, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void bmm_into(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  detail::check_same("bmm", {out, a, b});
  ZT_CHECK(out.dim() == 3 && a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) &&
               out.size(0) == a.size(0) && a.size(2) == b.size(1) && out.size(1) == a.size(1) &&
               out.size(2) == b.size(2) && out.is_contiguous(),
           "bmm_into: expected out (B, M, N) contiguous, a (B, M, K), b (B, K, N); got ",
           shape_str(out.sizes()), ", ", shape_str(a.sizes()), ", ", shape_str(b.sizes()));
  check_output_apart("bmm_into", out, a, b);
  detail::begin_write("bmm_into", out, {a, b});
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  if (B * M * N == 0) return;
  if (K == 0) {  // empty sums
    if (beta == 0.0) {
      out.zero_();
    } else {
      mul_(out, beta);
    }
    return;
  }
  BatchedOperand A = as_batched_operand(a), Bo = as_batched_operand(b);
  ZT_DISPATCH(out.device(), gemm_batched, A.trans, Bo.trans, M, N, K, alpha, A.t, A.ld, A.stride,
              Bo.t, Bo.ld, Bo.stride, beta, out, std::max<int64_t>(N, 1), M * N, B);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  detail::check_same("bmm", {a, b});
  detail::check_floating("bmm", a);
  ZT_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, got ", shape_str(a.sizes()),
           " and ", shape_str(b.sizes()));
  ZT_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm: shapes ", shape_str(a.sizes()),
           " and ", shape_str(b.sizes()), " do not match");
  Tensor ad = a.detach(), bd = b.detach();
  Tensor out = bmm_raw(ad, bd);
  if (autograd::needs_grad({a, b})) {
    bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::record("bmm", {a, b}, {out},
                     [ad = gb ? ad : Tensor(), bd = ga ? bd : Tensor()](
                         const std::vector<Tensor>& g) {  // each kept for the other's gradient
                       return std::vector<Tensor>{
                           bd.defined() ? bmm_raw(g[0], bd.transpose(1, 2)) : Tensor(),
                           ad.defined() ? bmm_raw(ad.transpose(1, 2), g[0]) : Tensor()};
                     },
                     {ga ? bd : Tensor(), gb ? ad : Tensor()});
  }
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_same("matmul", {a, b});
  detail::check_floating("matmul", a);
  ZT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: operands must be at least 1-D, got ",
           shape_str(a.sizes()), " and ", shape_str(b.sizes()), "; scale by a scalar with mul()");
  // Checked before 1-D operands become matrices, so that the error names them as given.
  const int64_t K = a.size(-1);
  ZT_CHECK(b.size(b.dim() == 1 ? 0 : -2) == K, "matmul: inner dimensions differ, ",
           shape_str(a.sizes()), " @ ", shape_str(b.sizes()));
  if (a.dim() == 1 && b.dim() == 1) return matmul(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul(a, b.unsqueeze(1)).squeeze(-1);
  const int64_t M = a.size(-2), N = b.size(-1);
  if (a.dim() == 2 && b.dim() == 2) {
    Tensor out = mm_raw(a.detach(), b.detach());
    if (autograd::needs_grad({a, b})) {
      bool ga = a.requires_grad(), gb = b.requires_grad();
      autograd::record("mm", {a, b}, {out},
                       [a = gb ? a : Tensor(), b = ga ? b : Tensor()](
                           const std::vector<Tensor>& g) {  // each kept for the other's gradient
                         return std::vector<Tensor>{
                             b.defined() ? mm_raw(g[0], b.detach().transpose(0, 1)) : Tensor(),
                             a.defined() ? mm_raw(a.detach().transpose(0, 1), g[0]) : Tensor()};
                       },
                       {ga ? b : Tensor(), gb ? a : Tensor()});
    }
    return out;
  }
  Shape ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  const std::string op = "matmul of " + shape_str(a.sizes()) + " and " + shape_str(b.sizes());
  Shape batch = broadcast_shapes(ba, bb, op.c_str());  // the batch dims
  Shape sa = batch, sb = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  int64_t B = shape_numel(batch);
  Tensor a3 = a.expand(sa).reshape({B, M, K});
  Tensor b3 = b.expand(sb).reshape({B, K, N});
  Shape so = batch;
  so.insert(so.end(), {M, N});
  return bmm(a3, b3).reshape(so);
}

namespace {

// out2 (rows, F_out) = x2 (rows, F_in) @ w^T + bias, then, when gelu, aux = that and
// out2 = gelu_tanh(aux): one gemm_epilogue call. F_in > 0; no autograd.
void linear_into(const Tensor& out2, const Tensor& x2, const Tensor& w, const Tensor& bias,
                 bool gelu, const Tensor& aux) {
  GemmOperand X = as_gemm_operand(x2), W = as_gemm_operand(w.transpose(0, 1));
  Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  ZT_DISPATCH(out2.device(), gemm_epilogue, X.trans, W.trans, x2.size(0), w.size(0), x2.size(1),
              X.t, X.ld, W.t, W.ld, b, gelu, out2, aux);
}

// x (..., last) as rows: (product of the leading dims, last); -1 would not do where
// last is 0.
Tensor as_rows(const Tensor& x) {
  const int64_t last = x.size(-1);
  Shape lead(x.sizes().begin(), x.sizes().end() - 1);
  return x.reshape({shape_numel(lead), last});
}

// The backward of linear (gelu = false) and linear_gelu from the output gradient g
// (..., F_out): the gradient of the pre-activation and the bias gradient in one
// gemm_epilogue_backward pass, then the x and weight gradients as requested.
std::vector<Tensor> linear_backward(const Tensor& g, const Tensor& x, const Tensor& weight,
                                    const Tensor& pre, bool gelu, bool gx, bool gw, bool gb,
                                    const Shape& xs) {
  const int64_t fout = weight.size(0);
  Tensor g2 = as_rows(g).contiguous();
  const int64_t rows = g2.size(0);
  Tensor dpre = gelu ? Tensor::empty({rows, fout}, g2.dtype(), g2.device()) : g2;
  Tensor dx, dw, db;
  if (gb) db = Tensor::empty({fout}, g2.dtype(), g2.device());
  if (gelu || gb)
    ZT_DISPATCH(g2.device(), gemm_epilogue_backward, rows, fout, g2, pre, gelu, dpre, db);
  if (gx) dx = mm_raw(dpre, weight.detach()).view(xs);
  if (gw) dw = mm_raw(dpre.transpose(0, 1), as_rows(x.detach()));
  return {dx, dw, db};
}

// linear (gelu false) and linear_gelu: out = [gelu_tanh](x @ weight^T + bias) through one
// gemm_epilogue call and one autograd node; errors name `op`.
Tensor linear_op(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                 bool gelu) {
  detail::check_same(op, {x, weight, bias});
  detail::check_floating(op, x);
  ZT_CHECK(weight.dim() == 2, op, ": weight must be (out, in), got ", shape_str(weight.sizes()));
  const int64_t fin = weight.size(1), fout = weight.size(0);
  ZT_CHECK(x.dim() >= 1 && x.size(-1) == fin, op, ": input ", shape_str(x.sizes()),
           " does not end in in_features = ", fin);
  ZT_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == fout), op, ": bias ",
           shape_str(bias.defined() ? bias.sizes() : Shape{}), " must be (", fout, ")");
  ZT_CHECK(!gelu || fin > 0, op, ": weight ", shape_str(weight.sizes()),
           " has no input features; use at least one");
  Tensor x2 = as_rows(x.detach());
  const int64_t rows = x2.size(0);
  Tensor out2 = Tensor::empty({rows, fout}, x.dtype(), x.device());
  Tensor pre =
      gelu ? Tensor::empty({rows, fout}, x.dtype(), x.device()) : Tensor();  // GELU's input
  if (fin > 0) {
    linear_into(out2, x2, weight.detach(), bias.defined() ? bias.detach() : Tensor(), gelu, pre);
  } else if (bias.defined()) {
    out2.copy_(bias.detach().expand({rows, fout}));
  } else {
    out2.zero_();
  }
  Shape os = x.sizes();
  os.back() = fout;
  Tensor out = out2.view(os);
  if (autograd::needs_grad({x, weight, bias})) {
    bool gx = x.requires_grad(), gw = weight.requires_grad();
    bool gb = bias.defined() && bias.requires_grad();
    Shape xs = x.sizes();
    // Save x and weight themselves (not views): a ZeRO engine re-gathers the weight
    // into the same tensor before backward. x is kept only for the weight's gradient.
    autograd::record(
        op, {x, weight, bias}, {out},
        [x = gw ? x : Tensor(), weight, pre, gelu, gx, gw, gb, xs](const std::vector<Tensor>& g) {
          return linear_backward(g[0], x, weight, pre, gelu, gx, gw, gb, xs);
        },
        {gw ? x : Tensor(), gx ? weight : Tensor()});
  }
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_op("linear", x, weight, bias, false);
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_op("linear_gelu", x, weight, bias, true);
}

}  // namespace zt
