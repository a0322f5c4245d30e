// CPU convolution: vol2col + one GEMM per chunk of samples, and the reverse for the
// backward pass. A chunk groups enough samples that the GEMM has at least
// kTargetCols columns, so late encoder levels (4x4 maps) still run one large GEMM
// instead of many skinny ones. The column matrix of a chunk is (K, m*L), columns
// ordered (sample, Do, Ho, Wo); with one sample per chunk the GEMM writes the output
// (and reads the output gradient) in place, otherwise the (O, m*L) result is
// transposed to (m, O, L) in one pass that also adds the bias.
// Threads: with num_threads() > 1 the batch is split into one group of samples per
// thread (parallel_for), each running the serial path with a single-threaded BLAS;
// the weight gradient is reduced from per-group partial sums. Mixing OpenMP workers
// with BLAS's own thread pool instead oversubscribes the cores (measured 10-30x
// slower on 2 cores), so the two are never active at once.
#include "core/cpu/conv.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/parallel.h"

namespace zt::cpu {

namespace {

constexpr int64_t kTargetCols = 256;  // GEMM columns per chunk worth batching samples for

void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

int64_t samples_per_chunk(const ConvGeometry& g) {
  int64_t l = std::max<int64_t>(g.out_positions(), 1);
  return std::clamp<int64_t>((kTargetCols + l - 1) / l, 1, std::max<int64_t>(g.n, 1));
}

// Keeps BLAS single-threaded while in scope (it runs inside our worker threads), then
// restores the previous count.
class SerialBlas {
 public:
  SerialBlas() : prev_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SerialBlas() { openblas_set_num_threads(prev_); }
  SerialBlas(const SerialBlas&) = delete;
  SerialBlas& operator=(const SerialBlas&) = delete;

 private:
  int prev_;
};

// Sample groups for the threads: one per thread, at most one per sample, and only as
// many as keep about kMinGroupFlops of GEMM work each (small convs, such as those of
// gradient checks, run serially: a parallel region would cost more than it saves).
constexpr double kMinGroupFlops = 4e6;
int64_t sample_groups(const ConvGeometry& g) {
  const double flops = 2.0 * static_cast<double>(g.n) * static_cast<double>(g.o) *
                       static_cast<double>(g.col_rows()) * static_cast<double>(g.out_positions());
  const auto by_work = static_cast<int64_t>(flops / kMinGroupFlops);
  return std::max<int64_t>(1, std::min<int64_t>({num_threads(), g.n, by_work}));
}

// Output positions o along one axis whose input index o*s + tap - pad lies in [0, in).
struct Span {
  int64_t lo, hi;
};
Span valid_span(int64_t tap, int64_t s, int64_t pad, int64_t in, int64_t out) {
  int64_t lo = pad - tap <= 0 ? 0 : (pad - tap + s - 1) / s;
  int64_t last = in - 1 + pad - tap;  // largest o*s allowed
  int64_t hi = last < 0 ? 0 : std::min(out, last / s + 1);
  return {std::min(lo, hi), hi};
}

// One column-matrix row: kernel tap (c, i, j, k) with its valid output spans.
struct Tap {
  int64_t c, i, j, k;
  Span sd, sh, sw;
};
Tap make_tap(const ConvGeometry& g, int64_t r) {
  int64_t kvol = g.kd * g.kh * g.kw, t = r % kvol;
  Tap p{r / kvol, t / (g.kh * g.kw), (t / g.kw) % g.kh, t % g.kw, {}, {}, {}};
  p.sd = valid_span(p.i, g.sd, g.pad_d, g.d, g.od);
  p.sh = valid_span(p.j, g.sh, g.pad_h, g.h, g.oh);
  p.sw = valid_span(p.k, g.sw, g.pad_w, g.w, g.ow);
  return p;
}

// col (K, m*L) <- samples x (m, C, D, H, W); zeros where the tap reads padding.
template <typename T>
void vol2col(const ConvGeometry& g, const T* x, int64_t m, T* col) {
  const int64_t l = g.out_positions(), ld = m * l, in_pos = g.in_positions();
  const int64_t plane = g.oh * g.ow;
  for (int64_t r = 0; r < g.col_rows(); ++r) {
    if (g.is_pointwise()) {
      for (int64_t b = 0; b < m; ++b)
        std::memcpy(col + r * ld + b * l, x + (b * g.c + r) * in_pos, l * sizeof(T));
      continue;
    }
    const Tap p = make_tap(g, r);
    for (int64_t b = 0; b < m; ++b) {
      const T* xc = x + (b * g.c + p.c) * in_pos;
      T* dst = col + r * ld + b * l;
      std::fill_n(dst, p.sd.lo * plane, T(0));
      std::fill_n(dst + p.sd.hi * plane, (g.od - p.sd.hi) * plane, T(0));
      for (int64_t od = p.sd.lo; od < p.sd.hi; ++od) {
        const T* xp = xc + (od * g.sd + p.i - g.pad_d) * g.h * g.w;
        T* dp = dst + od * plane;
        std::fill_n(dp, p.sh.lo * g.ow, T(0));
        std::fill_n(dp + p.sh.hi * g.ow, (g.oh - p.sh.hi) * g.ow, T(0));
        for (int64_t oh = p.sh.lo; oh < p.sh.hi; ++oh) {
          T* drow = dp + oh * g.ow;
          // Input element of output column o is xp[base + o * sw]; only [lo, hi) is read.
          const int64_t base = (oh * g.sh + p.j - g.pad_h) * g.w + p.k - g.pad_w;
          std::fill_n(drow, p.sw.lo, T(0));
          std::fill_n(drow + p.sw.hi, g.ow - p.sw.hi, T(0));
          if (g.sw == 1) {
            std::memcpy(drow + p.sw.lo, xp + base + p.sw.lo, (p.sw.hi - p.sw.lo) * sizeof(T));
          } else {
            for (int64_t o = p.sw.lo; o < p.sw.hi; ++o) drow[o] = xp[base + o * g.sw];
          }
        }
      }
    }
  }
}

// dx (m, C, D, H, W) <- sum of col (K, m*L) over the taps that read each input element.
// Overwrites dx.
template <typename T>
void col2vol(const ConvGeometry& g, const T* col, int64_t m, T* dx) {
  const int64_t l = g.out_positions(), ld = m * l, in_pos = g.in_positions();
  const int64_t plane = g.oh * g.ow;
  if (g.is_pointwise()) {  // one tap per element: a copy
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t b = 0; b < m; ++b)
        std::memcpy(dx + (b * g.c + c) * in_pos, col + c * ld + b * l, l * sizeof(T));
    return;
  }
  std::fill_n(dx, m * g.c * in_pos, T(0));
  for (int64_t r = 0; r < g.col_rows(); ++r) {
    const Tap p = make_tap(g, r);
    for (int64_t b = 0; b < m; ++b) {
      T* xc = dx + (b * g.c + p.c) * in_pos;
      const T* src = col + r * ld + b * l;
      for (int64_t od = p.sd.lo; od < p.sd.hi; ++od) {
        T* xp = xc + (od * g.sd + p.i - g.pad_d) * g.h * g.w;
        for (int64_t oh = p.sh.lo; oh < p.sh.hi; ++oh) {
          const T* srow = src + od * plane + oh * g.ow;
          T* xrow = xp + (oh * g.sh + p.j - g.pad_h) * g.w + p.k - g.pad_w;
          if (g.sw == 1) {
            for (int64_t o = p.sw.lo; o < p.sw.hi; ++o) xrow[o] += srow[o];
          } else {
            for (int64_t o = p.sw.lo; o < p.sw.hi; ++o) xrow[o * g.sw] += srow[o];
          }
        }
      }
    }
  }
}

// Raw pointers of one call; any of the optional ones may be null.
template <typename T>
struct ConvData {
  const T* x = nullptr;
  const T* w = nullptr;
  const T* bias = nullptr;
  const T* grad_out = nullptr;
  T* out = nullptr;
  T* grad_x = nullptr;
};

// Forward for samples [n_begin, n_end), serially.
template <typename T>
void forward_range(const ConvGeometry& g, const ConvData<T>& a, int64_t n_begin, int64_t n_end) {
  const int64_t k = g.col_rows(), l = g.out_positions(), o = g.o;
  const int64_t x_stride = g.c * g.in_positions(), out_stride = o * l;
  const int64_t nb = std::min(samples_per_chunk(g), n_end - n_begin);
  const bool pointwise = g.is_pointwise();
  std::vector<T> col(pointwise && nb == 1 ? 0 : k * nb * l);
  std::vector<T> y(nb > 1 ? o * nb * l : 0);
  for (int64_t n0 = n_begin; n0 < n_end; n0 += nb) {
    const int64_t m = std::min(nb, n_end - n0), cols = m * l;
    const T* colp = a.x + n0 * x_stride;
    if (!(pointwise && m == 1)) {
      vol2col(g, a.x + n0 * x_stride, m, col.data());
      colp = col.data();
    }
    T* dst = a.out + n0 * out_stride;
    if (m == 1) {  // the GEMM result is already (O, L): write it in place over the bias
      if (a.bias) {
        for (int64_t oc = 0; oc < o; ++oc) std::fill_n(dst + oc * l, l, a.bias[oc]);
      }
      blas_gemm(false, false, o, l, k, a.w, k, colp, l, T(a.bias ? 1 : 0), dst, l);
      continue;
    }
    blas_gemm(false, false, o, cols, k, a.w, k, colp, cols, T(0), y.data(), cols);
    for (int64_t oc = 0; oc < o; ++oc) {  // (O, m, L) -> (m, O, L), adding the bias
      const T bv = a.bias ? a.bias[oc] : T(0);
      for (int64_t b = 0; b < m; ++b) {
        const T* src = y.data() + oc * cols + b * l;
        T* d = dst + b * out_stride + oc * l;
        for (int64_t i = 0; i < l; ++i) d[i] = src[i] + bv;
      }
    }
  }
}

// Backward for samples [n_begin, n_end), serially: grad_x of those samples (if wanted)
// and their weight gradient written (not added) to dw (if non-null).
template <typename T>
void backward_range(const ConvGeometry& g, const ConvData<T>& a, T* dw, int64_t n_begin,
                    int64_t n_end) {
  const int64_t k = g.col_rows(), l = g.out_positions(), o = g.o;
  const int64_t x_stride = g.c * g.in_positions(), out_stride = o * l;
  if (dw && n_begin == n_end) std::fill_n(dw, o * k, T(0));
  const int64_t nb = std::min(samples_per_chunk(g), std::max<int64_t>(n_end - n_begin, 1));
  const bool pointwise = g.is_pointwise();
  const bool need_col = dw && !(pointwise && nb == 1);
  const bool need_dcol = a.grad_x && !(pointwise && nb == 1);
  std::vector<T> col(need_col ? k * nb * l : 0), dcol(need_dcol ? k * nb * l : 0);
  std::vector<T> gbuf(nb > 1 ? o * nb * l : 0);
  for (int64_t n0 = n_begin; n0 < n_end; n0 += nb) {
    const int64_t m = std::min(nb, n_end - n0), cols = m * l;
    const bool direct = pointwise && m == 1;
    // The output gradient of the chunk as (O, m*L).
    const T* gm = a.grad_out + n0 * out_stride;
    if (m > 1) {
      for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t b = 0; b < m; ++b)
          std::memcpy(gbuf.data() + oc * cols + b * l, gm + b * out_stride + oc * l, l * sizeof(T));
      gm = gbuf.data();
    }
    if (dw) {  // dW (O, K) += G (O, m*L) @ col^T (m*L, K)
      const T* colp = a.x + n0 * x_stride;
      if (!direct) {
        vol2col(g, a.x + n0 * x_stride, m, col.data());
        colp = col.data();
      }
      blas_gemm(false, true, o, k, cols, gm, cols, colp, cols, T(n0 == n_begin ? 0 : 1), dw, k);
    }
    if (a.grad_x) {  // dcol (K, m*L) = W^T (K, O) @ G (O, m*L), then fold back
      T* dxs = a.grad_x + n0 * x_stride;
      if (direct) {
        blas_gemm(true, false, k, cols, o, a.w, k, gm, cols, T(0), dxs, cols);
      } else {
        blas_gemm(true, false, k, cols, o, a.w, k, gm, cols, T(0), dcol.data(), cols);
        col2vol(g, dcol.data(), m, dxs);
      }
    }
  }
}

template <typename T>
void forward_impl(const ConvGeometry& g, const Tensor& out, const Tensor& x, const Tensor& weight,
                  const Tensor& bias) {
  ConvData<T> a;
  a.x = x.data<T>();
  a.w = weight.data<T>();
  a.bias = bias.defined() ? bias.data<T>() : nullptr;
  a.out = out.data<T>();
  const int64_t groups = sample_groups(g);
  if (groups <= 1) {
    forward_range(g, a, 0, g.n);
    return;
  }
  SerialBlas serial;
  parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t t = g0; t < g1; ++t) forward_range(g, a, g.n * t / groups, g.n * (t + 1) / groups);
  });
}

template <typename T>
void backward_impl(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                   const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                   const Tensor& grad_bias) {
  ConvData<T> a;
  a.x = x.data<T>();
  a.w = weight.data<T>();
  a.grad_out = grad_out.data<T>();
  a.grad_x = grad_x.defined() ? grad_x.data<T>() : nullptr;
  const int64_t l = g.out_positions(), o = g.o, wnum = o * g.col_rows();
  if (grad_bias.defined()) {  // db[o] = sum over (n, l), accumulated in double
    T* db = grad_bias.data<T>();
    for (int64_t oc = 0; oc < o; ++oc) {
      double s = 0;
      for (int64_t n = 0; n < g.n; ++n) {
        const T* src = a.grad_out + (n * o + oc) * l;
        for (int64_t i = 0; i < l; ++i) s += src[i];
      }
      db[oc] = T(s);
    }
  }
  T* dw = grad_weight.defined() ? grad_weight.data<T>() : nullptr;
  if (!a.grad_x && !dw) return;
  const int64_t groups = sample_groups(g);
  if (groups <= 1) {
    backward_range(g, a, dw, 0, g.n);
    return;
  }
  // Group 0 writes dw directly; the others write partial sums, added afterwards in a
  // fixed order so the result does not depend on scheduling.
  std::vector<T> partial(dw ? (groups - 1) * wnum : 0);
  {
    SerialBlas serial;
    parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
      for (int64_t t = g0; t < g1; ++t) {
        T* target = !dw ? nullptr : (t == 0 ? dw : partial.data() + (t - 1) * wnum);
        backward_range(g, a, target, g.n * t / groups, g.n * (t + 1) / groups);
      }
    });
  }
  if (!dw) return;
  parallel_for(wnum, 16384, [&](int64_t i0, int64_t i1) {
    for (int64_t t = 1; t < groups; ++t) {
      const T* src = partial.data() + (t - 1) * wnum;
      for (int64_t i = i0; i < i1; ++i) dw[i] += src[i];
    }
  });
}

}  // namespace

void conv_forward(const ConvGeometry& g, const Tensor& out, const Tensor& x, const Tensor& weight,
                  const Tensor& bias) {
  switch (x.dtype()) {
    case DType::f32:
      return forward_impl<float>(g, out, x, weight, bias);
    case DType::f64:
      return forward_impl<double>(g, out, x, weight, bias);
    default:
      ZT_FAIL("conv on CPU supports f32 and f64, got ", dtype_name(x.dtype()));
  }
}

void conv_backward(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                   const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                   const Tensor& grad_bias) {
  switch (x.dtype()) {
    case DType::f32:
      return backward_impl<float>(g, grad_out, x, weight, grad_x, grad_weight, grad_bias);
    case DType::f64:
      return backward_impl<double>(g, grad_out, x, weight, grad_x, grad_weight, grad_bias);
    default:
      ZT_FAIL("conv backward on CPU supports f32 and f64, got ", dtype_name(x.dtype()));
  }
}

}  // namespace zt::cpu
