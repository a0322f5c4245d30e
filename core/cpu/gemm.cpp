// CPU GEMM through BLAS (cblas, row-major); the twin of core/cuda/gemm.cpp. bf16 and f16
// operands are converted to packed f32 copies, multiplied with fp32 accumulation (as
// GPUs do) and the result converted back. gemm_batched runs the products one after the
// other, each split over the threads (blas.h), or, when there are enough products and
// each is small, spreads them over the threads whole. gemm_epilogue writes the bias into
// the output rows, runs one BLAS GEMM with beta = 1 and then, with GELU, one pass that
// stores the pre-activation and the activation (f32 rows in lane arithmetic, lanes.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/blas.h"
#include "core/cpu/lanes.h"
#include "core/cpu/loops.h"
#include "core/kernels.h"
#include "core/parallel.h"

namespace zt::cpu {

namespace {

void gemm_f32_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                  int64_t lda, const Tensor& b, int64_t ldb, double beta, const Tensor& c,
                  int64_t ldc) {
  switch (c.dtype()) {
    case DType::f32:
      blas_gemm(ta, tb, m, n, k, static_cast<float>(alpha), a.data<float>(), lda, b.data<float>(),
                ldb, static_cast<float>(beta), c.data<float>(), ldc);
      return;
    case DType::f64:
      blas_gemm(ta, tb, m, n, k, alpha, a.data<double>(), lda, b.data<double>(), ldb, beta,
                c.data<double>(), ldc);
      return;
    default:
      ZT_FAIL("gemm on CPU supports f32, f64, bf16 and f16, got ", dtype_name(c.dtype()));
  }
}

// Products at most this large (2 m n k flops) are too small for BLAS to thread well, so
// a batch of them is spread over the threads instead; larger ones run one at a time.
constexpr double kSmallProductFlops = 2e6;

int64_t batch_groups(int64_t m, int64_t n, int64_t k, int64_t batch) {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                       static_cast<double>(std::max<int64_t>(k, 1));
  if (flops > kSmallProductFlops) return 1;
  return blas_work_groups(flops * static_cast<double>(batch), batch);
}

// A 16-bit GEMM operand is a 2-D view whose memory layout (trans, ld) BLAS reads, so
// its memory layout — the transpose of the view when trans — becomes a packed f32 copy.
Tensor to_f32(const Tensor& t, bool trans, int64_t& ld) {
  Tensor f = (trans ? t.transpose(0, 1) : t).to(DType::f32).contiguous();
  ld = std::max<int64_t>(f.size(1), 1);
  return f;
}

// acc (m, n), contiguous in the accumulation type A, preset to the bias rows (or
// anything when !has_bias): acc = op(A) op(B) + acc, then out = acc or gelu(acc) with
// aux = acc, rounded to T. acc may be out itself (T == A).
template <typename T, typename A>
void gemm_epilogue_typed(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const A* a, int64_t lda,
                         const A* b, int64_t ldb, bool has_bias, bool gelu, A* acc, T* out,
                         T* aux) {
  blas_gemm(ta, tb, m, n, k, a, lda, b, ldb, has_bias ? A(1) : A(0), acc, n);
  if (!gelu && static_cast<void*>(acc) == static_cast<void*>(out)) return;
  parallel_for(m, grain_for(n), [&](int64_t r0, int64_t r1) {
    const int64_t i0 = r0 * n, i1 = r1 * n;
    if constexpr (std::is_same_v<T, float>) {   // acc is out: keep the pre-activation, then
      std::copy(acc + i0, acc + i1, aux + i0);  // GELU the rows in place in lanes
      return lane_row(LaneOp::kGeluTanh, out + i0, acc + i0, nullptr, i1 - i0);
    }
    for (int64_t i = i0; i < i1; ++i) {
      const A v = acc[i];
      if (gelu) {
        aux[i] = T(v);
        out[i] = T(gelu_tanh_of(v));
      } else {
        out[i] = T(v);
      }
    }
  });
}

// Every row of acc (m, n) = bias (n) converted to A.
template <typename A, typename T>
void fill_bias_rows(A* acc, const T* bias, int64_t m, int64_t n) {
  parallel_for(m, grain_for(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < n; ++j) acc[r * n + j] = A(bias[j]);
  });
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, double beta, const Tensor& c,
          int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (is_16bit_float(c.dtype())) {
    int64_t la, lb, lc;
    Tensor af = to_f32(a, trans_a, la), bf = to_f32(b, trans_b, lb), cf = to_f32(c, false, lc);
    gemm_f32_f64(trans_a, trans_b, m, n, k, alpha, af, la, bf, lb, beta, cf, lc);
    c.copy_(cf);
    return;
  }
  gemm_f32_f64(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const Tensor& a, int64_t lda, int64_t stride_a, const Tensor& b, int64_t ldb,
                  int64_t stride_b, double beta, const Tensor& c, int64_t ldc, int64_t stride_c,
                  int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (c.dtype() != DType::f32 && c.dtype() != DType::f64) {
    // 16-bit: gemm converts each product's operands (a rare path on the CPU).
    for (int64_t i = 0; i < batch; ++i)
      gemm(trans_a, trans_b, m, n, k, alpha, a.select(0, i), lda, b.select(0, i), ldb, beta,
           c.select(0, i), ldc);
    return;
  }
  auto run = [&](int64_t i0, int64_t i1) {
    dispatch_floating(c.dtype(), "gemm_batched", [&]<typename T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        for (int64_t i = i0; i < i1; ++i)
          blas_gemm(trans_a, trans_b, m, n, k, static_cast<T>(alpha), a.data<T>() + i * stride_a,
                    lda, b.data<T>() + i * stride_b, ldb, static_cast<T>(beta),
                    c.data<T>() + i * stride_c, ldc);
      }
    });
  };
  const int64_t groups = batch_groups(m, n, k, batch);
  if (groups <= 1) {
    run(0, batch);  // each product is split over the threads
    return;
  }
  parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) run(batch * g / groups, batch * (g + 1) / groups);
  });
}

void gemm_epilogue(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Tensor& a,
                   int64_t lda, const Tensor& b, int64_t ldb, const Tensor& bias, bool gelu,
                   const Tensor& out, const Tensor& aux) {
  if (m == 0 || n == 0) return;
  const bool has_bias = bias.defined();
  dispatch_floating(out.dtype(), "gemm_epilogue", [&]<typename T>() {
    T* po = out.data<T>();
    T* px = gelu ? aux.data<T>() : nullptr;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (has_bias) fill_bias_rows(po, bias.data<T>(), m, n);
      gemm_epilogue_typed<T, T>(trans_a, trans_b, m, n, k, a.data<T>(), lda, b.data<T>(), ldb,
                                has_bias, gelu, po, po, px);
    } else {
      // 16-bit: packed f32 operands and an f32 accumulator, rounded once at the end.
      int64_t la, lb;
      Tensor af = to_f32(a, trans_a, la), bf = to_f32(b, trans_b, lb);
      Tensor acc = Tensor::empty({m, n}, DType::f32);
      if (has_bias) fill_bias_rows(acc.data<float>(), bias.data<T>(), m, n);
      gemm_epilogue_typed<T, float>(trans_a, trans_b, m, n, k, af.data<float>(), la,
                                    bf.data<float>(), lb, has_bias, gelu, acc.data<float>(), po,
                                    px);
    }
  });
}

void gemm_epilogue_backward(int64_t m, int64_t n, const Tensor& dy, const Tensor& aux, bool gelu,
                            const Tensor& dpre, const Tensor& dbias) {
  if (n == 0 || (!gelu && !dbias.defined())) return;
  dispatch_floating(dy.dtype(), "gemm_epilogue_backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* g = dy.data<T>();
    const T* x = gelu ? aux.data<T>() : nullptr;
    T* d = gelu ? dpre.data<T>() : nullptr;
    const T* src = gelu ? d : g;  // the values summed, as stored
    T* db = data_or_null<T>(dbias);
    // Column blocks over the threads; per column, sum_rows' order: 8 double lanes over
    // the rows r < m - m % 8 (row r in lane r % 8), the remaining rows into s, then s
    // plus the lanes in order.
    constexpr int64_t kLanes = 8;
    const int64_t full = m - m % kLanes;
    parallel_for(
        n, std::max<int64_t>(1, 16384 / std::max<int64_t>(m, 1)), [&](int64_t j0, int64_t j1) {
          const int64_t w = j1 - j0;
          std::vector<double> lanes(db ? kLanes * w : 0, 0.0), tail(db ? w : 0, 0.0);
          for (int64_t r = 0; r < m; ++r) {
            const int64_t row = r * n;
            if (gelu) {
              if constexpr (std::is_same_v<T, float>) {
                lane_row(LaneOp::kGeluTanhGrad, d + row + j0, g + row + j0, x + row + j0, w);
              } else {
                for (int64_t j = j0; j < j1; ++j)
                  d[row + j] = T(gelu_tanh_grad_of(A(g[row + j]), A(x[row + j])));
              }
            }
            if (!db) continue;
            double* acc = r < full ? lanes.data() + (r % kLanes) * w : tail.data();
            for (int64_t j = j0; j < j1; ++j) acc[j - j0] += static_cast<double>(src[row + j]);
          }
          if (!db) return;
          for (int64_t j = 0; j < w; ++j) {
            double s = tail[j];
            for (int64_t l = 0; l < kLanes; ++l) s += lanes[l * w + j];
            db[j0 + j] = T(static_cast<A>(s));
          }
        });
  });
}

}  // namespace zt::cpu
