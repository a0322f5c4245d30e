// CUDA normalization kernels: GroupNorm with its epilogue and BatchNorm (statistics,
// normalization, the analytic backward); LayerNorm is in cuda/layer_norm.cu. The twin of
// core/cpu/norm.cpp, whose formulas these follow line for line (statistics in one shifted pass, the
// block's first element as the shift, sums of dy and dy * (x - mean) in double, the final affine in
// the tensor's dtype). Same formulas, not the same bits: the CPU's AVX2 loops fuse x * a + b into
// one multiply-add, and nvcc fuses some double expressions the CPU rounds twice (last-place
// differences). Reductions use fixed trees (block_reduce.cuh): each device's results are bitwise
// reproducible run to run.
// Legend: N batch, C channels, S spatial elements per channel, G groups, Cg = C / G,
// M elements per statistic (Cg * S for GroupNorm, N * S for BatchNorm).
//
// Parallel layout: one block per statistic ((n, g) or c), one warp per (n, c) row for the
// GroupNorm backward sums and its input gradient, blocks of 32 channels x kSumLanes batch
// lanes for its parameter gradients, one thread per element for BatchNorm's elementwise
// passes.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/cuda/row_chunks.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr int kWarps = kThreads / 32;
constexpr int kSumLanes = 16;  // batch lanes of the GroupNorm parameter gradients (blockDim.y)

template <typename T>
__device__ __forceinline__ double dbl(T v) {
  return static_cast<double>(v);
}

// ---------------------------------------------------------------- kernels: GroupNorm

// Mean and (biased) variance of M > 0 values from their shifted sums s1 = sum(x - k) and
// s2 = sum((x - k)^2), as the CPU's moments_from_shifted_sums.
__device__ __forceinline__ void moments_from_shifted_sums(double k, double s1, double s2, int64_t M,
                                                          double& mu, double& var) {
  const double m1 = s1 / static_cast<double>(M);
  mu = k + m1;
  var = fmax(0.0, s2 / static_cast<double>(M) - m1 * m1);
}

// The per-channel coefficients of n = x a + sh from the statistics as stored (in T), as
// the CPU's affine_coefs: the backward recomputes the forward's n bit for bit.
// Each double operation rounds once (no contraction the compiler may choose per kernel).
template <typename T>
__device__ __forceinline__ void affine_coefs(const T* w, const T* b, int64_t c, T mean, T rstd,
                                             T& a, T& sh) {
  const double ad = mul_rn(dbl(rstd), w ? dbl(w[c]) : 1.0);
  a = static_cast<T>(ad);
  sh = static_cast<T>(sub_rn(b ? dbl(b[c]) : 0.0, mul_rn(dbl(mean), ad)));
}

// Block per (n, g): statistics over its M contiguous elements, then y: n = x a + sh, and
// the epilogue (scale and shift (N, C, S) or null; silu).
template <typename T>
__global__ void group_norm_forward_kernel(T* y, T* mean, T* rstd, const T* x, const T* w,
                                          const T* b, const T* scale, const T* shift, bool silu,
                                          int64_t C, int64_t S, int64_t G, double eps) {
  __shared__ double scratch[32];
  const int64_t ng = blockIdx.x, n = ng / G, g = ng % G, Cg = C / G, M = Cg * S;
  const int64_t base = (n * C + g * Cg) * S;
  const T* blk = x + base;
  double mu = 0, var = 0;
  if (M > 0) {
    const double k = dbl(blk[0]);
    double s1 = 0, s2 = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      double d = dbl(blk[i]) - k;
      s1 += d;
      s2 += d * d;
    }
    s1 = block_all_sum(s1, scratch);
    s2 = block_all_sum(s2, scratch);
    moments_from_shifted_sums(k, s1, s2, M, mu, var);
  }
  const T tmu = static_cast<T>(mu), tr = static_cast<T>(1.0 / sqrt(var + eps));
  if (threadIdx.x == 0) {
    mean[ng] = tmu;
    rstd[ng] = tr;
  }
  int64_t cached = -1;
  T ta = 0, tsh = 0;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const int64_t c = g * Cg + i / S;
    if (c != cached) {
      affine_coefs(w, b, c, tmu, tr, ta, tsh);
      cached = c;
    }
    T v = add_rn(mul_rn(blk[i], ta), tsh);
    if (scale) v = add_rn(mul_rn(v, scale[base + i]), shift[base + i]);
    y[base + i] = silu ? d_silu(v) : v;
  }
}

// Warp per (n, c) row: the epilogue's backward. With n = x a + sh recomputed as the
// forward rounded it and z = n scale + shift: dz = silu'(z) dy (dy without silu),
// dshift = dz, dscale = dz n, and the gradient of n, dz scale, written into g; each
// output only where not null.
template <typename T>
__global__ void group_norm_epilogue_grad_kernel(T* g, T* dscale, T* dshift, const T* dy, const T* x,
                                                const T* mean, const T* rstd, const T* w,
                                                const T* b, const T* scale, const T* shift,
                                                bool silu, int64_t NC, int64_t C, int64_t S,
                                                int64_t G) {
  const int64_t nc = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (nc >= NC) return;
  const int64_t c = nc % C, ng = (nc / C) * G + c / (C / G);
  T ta, tsh;
  affine_coefs(w, b, c, mean[ng], rstd[ng], ta, tsh);
  for (int64_t i = nc * S + threadIdx.x % 32; i < (nc + 1) * S; i += 32) {
    const T nv = add_rn(mul_rn(x[i], ta), tsh);
    const T z = scale ? add_rn(mul_rn(nv, scale[i]), shift[i]) : nv;
    const T dz = silu ? d_silu_grad(dy[i], z) : dy[i];
    if (dshift) dshift[i] = dz;
    if (dscale) dscale[i] = mul_rn(dz, nv);
    if (g) g[i] = scale ? mul_rn(dz, scale[i]) : dz;
  }
}

// Warp per (n, c) row: sdy = sum dy, sdyx = sum dy (x - mean[n, g]); the row read 16
// bytes at a time where it allows.
template <typename T>
__global__ void group_norm_row_sums_kernel(double* sdy, double* sdyx, const T* dy, const T* x,
                                           const T* mean, int64_t NC, int64_t C, int64_t S,
                                           int64_t G) {
  const int64_t nc = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (nc >= NC) return;
  const int64_t n = nc / C, g = (nc % C) / (C / G);
  const double mu = dbl(mean[n * G + g]);
  const T* rows[] = {dy + nc * S, x + nc * S};  // (dy, x)
  double a = 0, b = 0;
  row_for_each<double>(
      rows, S,
      [&](int64_t, const double(&v)[2]) {
        a += v[0];
        b += v[0] * (v[1] - mu);
      },
      RowThreads::warp());
  a = warp_reduce_sum(a);
  b = warp_reduce_sum(b);
  if (lane == 0) {
    sdy[nc] = a;
    sdyx[nc] = b;
  }
}

// Block of 32 channels x kSumLanes batch lanes: dweight = sum_n rstd[n, g] sdyx[n, c],
// dbias = sum_n sdy[n, c]; lane y adds n = y, y + kSumLanes, ... in order, then the lanes
// add in lane order (column_lanes_sum: the same bits every run). One thread per channel
// walking all N in turn waited on N dependent loads (a batch of 256: most of the backward).
template <typename T>
__global__ void group_norm_param_grad_kernel(T* dw, T* db, const double* sdy, const double* sdyx,
                                             const T* rstd, int64_t N, int64_t C, int64_t G) {
  __shared__ double scratch[kSumLanes][32];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t Cg = C / G;
  double w = 0, b = 0;
  if (c < C) {
#pragma unroll 4
    for (int64_t n = threadIdx.y; n < N; n += kSumLanes) {
      w += dbl(rstd[n * G + c / Cg]) * sdyx[n * C + c];
      b += sdy[n * C + c];
    }
  }
  w = column_lanes_sum(w, scratch);
  b = column_lanes_sum(b, scratch);
  if (threadIdx.y != 0 || c >= C) return;
  if (dw) dw[c] = static_cast<T>(w);
  if (db) db[c] = static_cast<T>(b);
}

// Thread per (n, g): the per-group coefficients c2, c3 of dx = c1 dy + c2 (x - mean) + c3.
template <typename T>
__global__ void group_norm_coef_kernel(double* c2, double* c3, const double* sdy,
                                       const double* sdyx, const T* rstd, const T* w, int64_t NG,
                                       int64_t C, int64_t S, int64_t G) {
  const int64_t ng = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ng >= NG) return;
  const int64_t n = ng / G, g = ng % G, Cg = C / G, M = Cg * S;
  const double inv_m = M > 0 ? 1.0 / static_cast<double>(M) : 0.0;
  const double r = dbl(rstd[ng]);
  double sum_dxhat = 0, sum_dxhat_xc = 0;
  for (int64_t cc = 0; cc < Cg; ++cc) {
    const int64_t c = g * Cg + cc;
    const double wc = w ? dbl(w[c]) : 1.0;
    sum_dxhat += wc * sdy[n * C + c];
    sum_dxhat_xc += wc * sdyx[n * C + c];
  }
  c2[ng] = -r * r * r * sum_dxhat_xc * inv_m;
  c3[ng] = -r * sum_dxhat * inv_m;
}

// Warp per (n, c) row: the row's coefficients once, then its S elements, 16 bytes at a
// time where the rows allow (the same per-element formula as one thread per element,
// without an index division each).
template <typename T>
__global__ void group_norm_dx_kernel(T* dx, const T* dy, const T* x, const T* mean, const T* rstd,
                                     const T* w, const double* c2, const double* c3, int64_t NC,
                                     int64_t C, int64_t S, int64_t G) {
  const int64_t nc = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (nc >= NC) return;
  const int64_t n = nc / C, c = nc % C, ng = n * G + c / (C / G);
  const double r = dbl(rstd[ng]);
  const T t1 = static_cast<T>(r * (w ? dbl(w[c]) : 1.0));
  const T t2 = static_cast<T>(c2[ng]), t3 = static_cast<T>(c3[ng]);
  const T tmu = static_cast<T>(dbl(mean[ng]));
  const T* rows[] = {dy + nc * S, x + nc * S};  // (dy, x)
  row_map<T>(
      rows, dx + nc * S, S,
      [&](int64_t, const T(&v)[2]) {
        return add_rn(add_rn(mul_rn(t1, v[0]), mul_rn(t2, v[1] - tmu)), t3);
      },
      RowThreads::warp());
}

// ---------------------------------------------------------------- kernels: BatchNorm

// Block per channel: shifted moments over the channel's N * S elements, then its mean,
// rstd and (rm and rv not null) running statistics; block 0 increments the counter (not
// null).
template <typename T, typename R>
__global__ void batch_norm_stats_kernel(T* mean, T* rstd, R* rm, R* rv, int64_t* counter,
                                        const T* x, int64_t N, int64_t C, int64_t S, double eps,
                                        double momentum, double unbias) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x, M = N * S;
  if (counter && c == 0 && threadIdx.x == 0) ++*counter;
  double mu = 0, v = 0;
  if (M > 0) {
    const double k = dbl(x[c * S]);
    double s1 = 0, s2 = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* row = x + (n * C + c) * S;
      for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
        double d = dbl(row[s]) - k;
        s1 += d;
        s2 += d * d;
      }
    }
    s1 = block_all_sum(s1, scratch);
    s2 = block_all_sum(s2, scratch);
    moments_from_shifted_sums(k, s1, s2, M, mu, v);
  }
  if (threadIdx.x == 0) {
    mean[c] = static_cast<T>(mu);
    rstd[c] = static_cast<T>(1.0 / d_sqrt(v + eps));
    if (rm) {
      // In double; convert<R> takes bf16/f16 through float (two roundings, as the CPU's cast).
      rm[c] = convert<R>((1.0 - momentum) * convert<double>(rm[c]) + momentum * mu);
      rv[c] = convert<R>((1.0 - momentum) * convert<double>(rv[c]) + momentum * unbias * v);
    }
  }
}

template <typename T>
__global__ void batch_norm_forward_kernel(T* y, const T* x, const T* mean, const T* rstd,
                                          const T* w, const T* b, int64_t total, int64_t C,
                                          int64_t S) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t c = (i / S) % C;
    const double a = dbl(rstd[c]) * (w ? dbl(w[c]) : 1.0);
    const double sh = (b ? dbl(b[c]) : 0.0) - dbl(mean[c]) * a;
    y[i] = add_rn(mul_rn(x[i], static_cast<T>(a)), static_cast<T>(sh));
  }
}

// Block per channel: sdy, sdyx over the channel's N * S elements; also writes the
// parameter gradients.
template <typename T>
__global__ void batch_norm_sums_kernel(double* sdy, double* sdyx, T* dw, T* db, const T* dy,
                                       const T* x, const T* mean, const T* rstd, int64_t N,
                                       int64_t C, int64_t S) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x;
  const double mu = dbl(mean[c]);
  double a = 0, b = 0;
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + (n * C + c) * S;
    const T* dr = dy + (n * C + c) * S;
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
      double d = dbl(dr[s]);
      a += d;
      b += d * (dbl(xr[s]) - mu);
    }
  }
  a = block_all_sum(a, scratch);
  b = block_all_sum(b, scratch);
  if (threadIdx.x == 0) {
    sdy[c] = a;
    sdyx[c] = b;
    if (dw) dw[c] = static_cast<T>(b * dbl(rstd[c]));
    if (db) db[c] = static_cast<T>(a);
  }
}

template <typename T>
__global__ void batch_norm_dx_kernel(T* dx, const T* dy, const T* x, const T* mean, const T* rstd,
                                     const T* w, const double* sdy, const double* sdyx,
                                     int64_t total, int64_t C, int64_t S, double inv_m,
                                     bool training) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t c = (i / S) % C;
    const double r = dbl(rstd[c]);
    const double c1 = r * (w ? dbl(w[c]) : 1.0);
    const double c2 = training ? -c1 * r * r * sdyx[c] * inv_m : 0.0;
    const double c3 = training ? -c1 * sdy[c] * inv_m : 0.0;
    dx[i] = add_rn(
        add_rn(mul_rn(static_cast<T>(c1), dy[i]), mul_rn(static_cast<T>(c2), x[i] - mean[c])),
        static_cast<T>(c3));
  }
}

// ---------------------------------------------------------------- helpers

Tensor f64_buffer(int64_t n, Device dev) {
  return Tensor::empty({std::max<int64_t>(n, 1)}, DType::f64, dev);
}

}  // namespace

// ---------------------------------------------------------------- launchers: GroupNorm

void group_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const GroupNormEpilogue& epi,
                        int64_t N, int64_t C, int64_t S, int64_t G, double eps) {
  check_device("group_norm", x.device(), {y, mean, rstd, weight, bias, epi.scale, epi.shift});
  if (N * G == 0) return;
  const int dev = x.device().index;
  dispatch_f32_f64(x.dtype(), "group_norm", [&]<typename T>() {
    DeviceGuard g(dev);
    group_norm_forward_kernel<T>
        <<<grid_x(N * G, "group_norm_forward_kernel"), kThreads, 0, current_stream()>>>(
            mptr<T>(y), mptr<T>(mean), mptr<T>(rstd), cptr<T>(x), cptr<T>(weight), cptr<T>(bias),
            cptr<T>(epi.scale), cptr<T>(epi.shift), epi.silu, C, S, G, eps);
    CUDA_CHECK_LAUNCH();
  });
}

void group_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dscale, const Tensor& dshift, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& bias, const GroupNormEpilogue& epi,
                         int64_t N, int64_t C, int64_t S, int64_t G) {
  check_device(
      "group_norm backward", x.device(),
      {dx, dweight, dbias, dscale, dshift, dy, mean, rstd, weight, bias, epi.scale, epi.shift});
  const Device d = x.device();
  dispatch_f32_f64(x.dtype(), "group_norm backward", [&]<typename T>() {
    DeviceGuard guard(d.index);
    cudaStream_t st = current_stream();
    // With an epilogue, the gradient of n is the norm's dy below: it goes into dx first
    // (or a buffer of its own when only dweight or dbias is wanted; nowhere when only the
    // epilogue's scale and shift are).
    const bool norm_grads = dx.defined() || dweight.defined() || dbias.defined();
    const T* pdy = cptr<T>(dy);
    if (epi.active() && N * C * S > 0) {
      Tensor gn = dx.defined() || !norm_grads ? dx : Tensor::empty(x.sizes(), x.dtype(), d);
      group_norm_epilogue_grad_kernel<T>
          <<<blocks_for(N * C, kWarps, "group_norm_epilogue_grad_kernel"), kThreads, 0, st>>>(
              mptr<T>(gn), mptr<T>(dscale), mptr<T>(dshift), pdy, cptr<T>(x), cptr<T>(mean),
              cptr<T>(rstd), cptr<T>(weight), cptr<T>(bias), cptr<T>(epi.scale), cptr<T>(epi.shift),
              epi.silu, N * C, C, S, G);
      CUDA_CHECK_LAUNCH();
      pdy = cptr<T>(gn);
    }
    if (!norm_grads) return;
    Tensor sdy = f64_buffer(N * C, d), sdyx = f64_buffer(N * C, d);
    double* psdy = mptr<double>(sdy);
    double* psdyx = mptr<double>(sdyx);
    if (N * C > 0) {
      group_norm_row_sums_kernel<T>
          <<<blocks_for(N * C, kWarps, "group_norm_row_sums_kernel"), kThreads, 0, st>>>(
              psdy, psdyx, pdy, cptr<T>(x), cptr<T>(mean), N * C, C, S, G);
      CUDA_CHECK_LAUNCH();
    }
    if ((dweight.defined() || dbias.defined()) && C > 0) {
      group_norm_param_grad_kernel<T>
          <<<blocks_for(C, 32, "group_norm_param_grad_kernel"), dim3(32, kSumLanes), 0, st>>>(
              mptr<T>(dweight), mptr<T>(dbias), psdy, psdyx, cptr<T>(rstd), N, C, G);
      CUDA_CHECK_LAUNCH();
    }
    if (!dx.defined() || N * C * S == 0) return;
    Tensor c2 = f64_buffer(N * G, d), c3 = f64_buffer(N * G, d);
    group_norm_coef_kernel<T>
        <<<blocks_for(N * G, kThreads, "group_norm_coef_kernel"), kThreads, 0, st>>>(
            mptr<double>(c2), mptr<double>(c3), psdy, psdyx, cptr<T>(rstd), cptr<T>(weight), N * G,
            C, S, G);
    CUDA_CHECK_LAUNCH();
    // dx may alias dy here (an epilogue's gradient of n): each element is read, then
    // written, by the same thread.
    group_norm_dx_kernel<T><<<blocks_for(N * C, kWarps, "group_norm_dx_kernel"), kThreads, 0, st>>>(
        mptr<T>(dx), pdy, cptr<T>(x), cptr<T>(mean), cptr<T>(rstd), cptr<T>(weight),
        cptr<double>(c2), cptr<double>(c3), N * C, C, S, G);
    CUDA_CHECK_LAUNCH();
  });
}

// ---------------------------------------------------------------- launchers: BatchNorm

void batch_norm_stats(const Tensor& mean, const Tensor& rstd, const Tensor& running_mean,
                      const Tensor& running_var, const Tensor& counter, const Tensor& x, int64_t N,
                      int64_t C, int64_t S, double eps, double momentum) {
  check_device("batch_norm", x.device(), {mean, rstd, running_mean, running_var, counter});
  if (C == 0) return;
  const int64_t M = N * S;
  const double unbias = static_cast<double>(M) / static_cast<double>(M - 1);
  // Without running statistics R is a placeholder (its pointers are null).
  const DType rdt = running_mean.defined() ? running_mean.dtype() : x.dtype();
  dispatch_f32_f64(x.dtype(), "batch_norm", [&]<typename T>() {
    dispatch_device_floating(rdt, "batch_norm running statistics", [&]<typename R>() {
      DeviceGuard g(x.device().index);
      batch_norm_stats_kernel<T, R>
          <<<grid_x(C, "batch_norm_stats_kernel"), kThreads, 0, current_stream()>>>(
              mptr<T>(mean), mptr<T>(rstd), mptr<R>(running_mean), mptr<R>(running_var),
              mptr<int64_t>(counter), cptr<T>(x), N, C, S, eps, momentum, unbias);
      CUDA_CHECK_LAUNCH();
    });
  });
}

void batch_norm_forward(const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                        const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, int64_t S) {
  check_device("batch_norm", x.device(), {y, mean, rstd, weight, bias});
  const int64_t total = N * C * S;
  if (total == 0) return;
  const int dev = x.device().index;
  dispatch_f32_f64(x.dtype(), "batch_norm", [&]<typename T>() {
    DeviceGuard g(dev);
    batch_norm_forward_kernel<T><<<grid_for(total, dev), kThreads, 0, current_stream()>>>(
        mptr<T>(y), cptr<T>(x), cptr<T>(mean), cptr<T>(rstd), cptr<T>(weight), cptr<T>(bias), total,
        C, S);
    CUDA_CHECK_LAUNCH();
  });
}

void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t N, int64_t C, int64_t S, bool training) {
  check_device("batch_norm backward", x.device(), {dx, dweight, dbias, dy, mean, rstd, weight});
  if (C == 0) return;
  const Device d = x.device();
  dispatch_f32_f64(x.dtype(), "batch_norm backward", [&]<typename T>() {
    DeviceGuard guard(d.index);
    cudaStream_t st = current_stream();
    Tensor sdy = f64_buffer(C, d), sdyx = f64_buffer(C, d);
    batch_norm_sums_kernel<T><<<grid_x(C, "batch_norm_sums_kernel"), kThreads, 0, st>>>(
        mptr<double>(sdy), mptr<double>(sdyx), mptr<T>(dweight), mptr<T>(dbias), cptr<T>(dy),
        cptr<T>(x), cptr<T>(mean), cptr<T>(rstd), N, C, S);
    CUDA_CHECK_LAUNCH();
    const int64_t total = N * C * S;
    if (!dx.defined() || total == 0) return;
    const double inv_m = 1.0 / static_cast<double>(N * S);
    batch_norm_dx_kernel<T><<<grid_for(total, d.index), kThreads, 0, st>>>(
        mptr<T>(dx), cptr<T>(dy), cptr<T>(x), cptr<T>(mean), cptr<T>(rstd), cptr<T>(weight),
        cptr<double>(sdy), cptr<double>(sdyx), total, C, S, inv_m, training);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zt::cuda
