// CPU LayerNorm kernels: statistics and normalization of each row, and the analytic
// backward. The twin of core/cuda/layer_norm.cu.
//
// Numerics: each row's statistics are one shifted pass in double (contiguous_moments in
// cpu/norm_sums.h); the normalization and the input gradient run in acc_t of the dtype
// (float for 16-bit inputs). Rows run in parallel, each reduced serially, and the
// parameter gradients are summed in double over fixed blocks of rows whose partial sums
// are then added in block order, so results do not depend on the number of threads.
#include "core/kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/loops.h"
#include "core/cpu/norm_sums.h"

namespace zt::cpu {

namespace {

// Rows per block of the parameter-gradient sums: a split of the rows, not of the
// threads, so dweight and dbias do not depend on the thread count.
constexpr int64_t kLayerNormRowBlock = 32;

// y = ((x - m) rs) w + b in A, rounded once to T; w, b may be null.
template <typename T, typename A>
void layer_norm_row(T* __restrict y, const T* __restrict x, const T* __restrict w,
                    const T* __restrict b, int64_t D, A m, A rs) {
  if (w && b) {
    for (int64_t j = 0; j < D; ++j)
      y[j] = static_cast<T>((static_cast<A>(x[j]) - m) * rs * static_cast<A>(w[j]) +
                            static_cast<A>(b[j]));
  } else if (w) {
    for (int64_t j = 0; j < D; ++j)
      y[j] = static_cast<T>((static_cast<A>(x[j]) - m) * rs * static_cast<A>(w[j]));
  } else if (b) {
    for (int64_t j = 0; j < D; ++j)
      y[j] = static_cast<T>((static_cast<A>(x[j]) - m) * rs + static_cast<A>(b[j]));
  } else {
    for (int64_t j = 0; j < D; ++j) y[j] = static_cast<T>((static_cast<A>(x[j]) - m) * rs);
  }
}

// One row of layer_norm_backward. xhat and g are scratch rows; sw, sb (the row block's
// sums of dy xhat and dy) and dx may be null (not wanted). With g = dy w:
//   dx = rs (g - mean(g) - xhat mean(g xhat)).
// The pointers are restrict so the loops vectorize when T is A (f32, f64).
template <typename T, typename A>
void layer_norm_row_backward(T* __restrict dx, double* __restrict sw, double* __restrict sb,
                             const T* __restrict dy, const T* __restrict x, const T* __restrict w,
                             A* __restrict xhat, A* __restrict g, int64_t D, A m, A rs, A inv_d) {
  for (int64_t j = 0; j < D; ++j) xhat[j] = (static_cast<A>(x[j]) - m) * rs;
  if (sw) {
    for (int64_t j = 0; j < D; ++j) {
      const double d = static_cast<double>(dy[j]);
      sw[j] += d * static_cast<double>(xhat[j]);
      sb[j] += d;
    }
  }
  if (!dx) return;
  if (w) {
    for (int64_t j = 0; j < D; ++j) g[j] = static_cast<A>(dy[j]) * static_cast<A>(w[j]);
  } else {
    for (int64_t j = 0; j < D; ++j) g[j] = static_cast<A>(dy[j]);
  }
  double sg = 0, sgx = 0;
  pair_sums(g, xhat, D, sg, sgx);
  const A c3 = -static_cast<A>(sg) * inv_d, c2 = -static_cast<A>(sgx) * inv_d;
  for (int64_t j = 0; j < D; ++j) dx[j] = static_cast<T>((g[j] + c3 + xhat[j] * c2) * rs);
}

}  // namespace

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t rows, int64_t D,
                        double eps) {
  dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>() {
    using A = acc_t<T>;
    const T* px = x.data<T>();
    const T* pw = data_or_null<T>(weight);
    const T* pb = data_or_null<T>(bias);
    T* py = y.data<T>();
    A* pm = mean.data<A>();
    A* pr = rstd.data<A>();
    parallel_for(rows, grain_for(D), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = px + r * D;
        double mu, var;
        contiguous_moments(xr, D, mu, var);
        const A m = static_cast<A>(mu), rs = static_cast<A>(1.0 / std::sqrt(var + eps));
        pm[r] = m;
        pr[r] = rs;
        layer_norm_row(py + r * D, xr, pw, pb, D, m, rs);
      }
    });
  });
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t rows, int64_t D) {
  dispatch_floating(x.dtype(), "layer_norm backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    const T* pw = data_or_null<T>(weight);
    const A* pm = mean.data<A>();
    const A* pr = rstd.data<A>();
    T* pdx = data_or_null<T>(dx);
    const bool params = dweight.defined() || dbias.defined();
    const int64_t blocks = (rows + kLayerNormRowBlock - 1) / kLayerNormRowBlock;
    // Per block of rows: sum dy * xhat and sum dy for every column.
    std::vector<double> part_w(params ? blocks * D : 0), part_b(params ? blocks * D : 0);
    const A inv_d = D > 0 ? static_cast<A>(1.0 / static_cast<double>(D)) : A(0);
    parallel_for(blocks, grain_for(kLayerNormRowBlock * D), [&](int64_t b0, int64_t b1) {
      std::vector<A> xhat(static_cast<size_t>(D)), g(static_cast<size_t>(D));
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t r_end = std::min(rows, (blk + 1) * kLayerNormRowBlock);
        for (int64_t r = blk * kLayerNormRowBlock; r < r_end; ++r) {
          layer_norm_row_backward(pdx ? pdx + r * D : nullptr,
                                  params ? part_w.data() + blk * D : nullptr,
                                  params ? part_b.data() + blk * D : nullptr, pdy + r * D,
                                  px + r * D, pw, xhat.data(), g.data(), D, pm[r], pr[r], inv_d);
        }
      }
    });
    if (!params) return;
    T* pdw = data_or_null<T>(dweight);
    T* pdb = data_or_null<T>(dbias);
    // Each column's partial sums in block order (blocks outer so the reads are rows).
    parallel_for(D, grain_for(blocks), [&](int64_t j0, int64_t j1) {
      std::vector<double> w(static_cast<size_t>(j1 - j0)), b(static_cast<size_t>(j1 - j0));
      for (int64_t blk = 0; blk < blocks; ++blk) {
        for (int64_t j = j0; j < j1; ++j) {
          w[j - j0] += part_w[blk * D + j];
          b[j - j0] += part_b[blk * D + j];
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        if (pdw) pdw[j] = static_cast<T>(w[j - j0]);
        if (pdb) pdb[j] = static_cast<T>(b[j - j0]);
      }
    });
  });
}

}  // namespace zt::cpu
