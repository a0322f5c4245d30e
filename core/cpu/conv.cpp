// CPU convolution. "Same" 3x3 convolutions with enough channels (most of a VQ
// autoencoder's work) run Winograd F(2x2, 3x3) for all three passes (winograd.h): 2.25x
// fewer multiplications. Other stride-1 convolutions copy each sample into zero-padded
// planes and run one GEMM per kernel tap on windows of those planes read in place
// (conv_cols.h): no column matrix is built, and the input gradient is accumulated by
// the GEMMs straight into padded planes. Measured on the tiny tokenizer's 3x3 convs
// this beats a column matrix + one large GEMM by 10-40% (the column copies cost more
// than the shorter GEMMs lose). Other convolutions (strided, pointwise, small 3-D
// maps) build exact columns and run one GEMM per chunk of samples; a chunk groups
// enough samples that the GEMM has at least kTargetCols columns, so 4x4 maps still run
// one large GEMM instead of many skinny ones. The column matrix of a chunk is (K, m*L),
// columns ordered (sample, Do, Ho, Wo); with one sample per chunk the GEMM writes the
// output (and reads the output gradient) in place, otherwise the (O, m*L) result is
// transposed to (m, O, L) in one pass that also adds the bias. Pointwise convolutions of
// at most kFewInputs input channels skip the GEMM, every sample alike
// (pointwise_few_inputs).
// Grouped convolutions run each group as one of the above on copies of its channels,
// except depthwise ones (one input channel per group), which run directly
// (conv_depthwise.h).
// Threads: with num_threads() > 1 the batch is split into one group of samples per
// thread (parallel_for), each running the serial path with a single-threaded BLAS; a
// group is whole chunks of the path (SampleGroups), so every GEMM has the size it has in
// a serial pass and the output its bits. A backward that computes the weight gradient
// splits the batch into slices fixed by the work instead (weight_slices), reduced from
// per-slice partial sums in a fixed order, so its bits do not depend on the thread count
// either. Mixing OpenMP workers
// with BLAS's own thread pool instead oversubscribes the cores (measured 10-30x
// slower on 2 cores), so the two are never active at once.
// The wide-vector helpers of lanes.h are always inlined into functions built for their ISA,
// so GCC's note that passing such vectors by value changes the ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "core/kernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cpu/blas.h"
#include "core/cpu/conv_cols.h"
#include "core/cpu/conv_depthwise.h"
#include "core/cpu/conv_path.h"
#include "core/cpu/lanes.h"
#include "core/cpu/loops.h"
#include "core/cpu/norm_sums.h"
#include "core/cpu/winograd.h"
#include "core/parallel.h"

namespace zt::cpu {

namespace {

constexpr int64_t kTargetCols = 256;  // GEMM columns per chunk worth batching samples for
// Output columns per block of the padded-plane path: a block's kd*kh*kw tap GEMMs
// accumulate into the same (O, kBlockCols) tile while it is still in cache.
constexpr int64_t kBlockCols = 256;

// Samples per GEMM for `cols` columns per sample.
int64_t samples_per_chunk(const ConvGeometry& g, int64_t cols) {
  const int64_t l = std::max<int64_t>(cols, 1);
  return std::clamp<int64_t>((kTargetCols + l - 1) / l, 1, std::max<int64_t>(g.n, 1));
}

double conv_flops(const ConvGeometry& g) {
  return 2.0 * static_cast<double>(g.n) * static_cast<double>(g.o) *
         static_cast<double>(g.col_rows()) * static_cast<double>(g.out_positions());
}

// Sample groups for the threads (blas_work_groups; small convs, such as those of gradient
// checks, run serially).
int64_t sample_groups(const ConvGeometry& g) {
  return blas_work_groups(conv_flops(g), g.n);
}

// Slices of the batch for a backward with a weight gradient: each computes its samples'
// gradients in one pass, its weight gradient into a buffer of its own, and the buffers
// add up in a fixed order. Their number follows the work (groups_worth, and
// kSliceColumns output columns or more each, at most kWeightSlices), not the threads,
// which take slices in parallel: the weight gradient has the same bits at any thread
// count, so a run resumed on other cores trains on as it would have. Small maps make
// one slice (a slice's transforms and buffer would cost more than its share).
constexpr int64_t kWeightSlices = 8, kSliceColumns = 1024;
int64_t weight_slices(const ConvGeometry& g) {
  const int64_t by_columns = g.n * g.out_positions() / kSliceColumns;
  return std::clamp<int64_t>(
      std::min({kWeightSlices, g.n, groups_worth(conv_flops(g)), by_columns}), 1, kWeightSlices);
}

// $ZT_CONV_PATH (conv_path.h), read once per process, forces a path wherever that path
// applies; unset, the rule below decides. conv_forward and conv_backward read it before
// any parallel_for, so a bad value is an error on the calling thread, not on a worker.
std::optional<ConvPath> forced_path() {
  static const std::optional<ConvPath> forced = parse_conv_path(std::getenv("ZT_CONV_PATH"));
  return forced;
}

// Winograd where it applies (2.25x fewer multiplications, fastest at every measured
// "same" 3x3 shape, 4x4 maps included), then padded planes, then exact columns.
ConvPath choose_path(const ConvGeometry& g) {
  const std::optional<ConvPath> f = forced_path();
  if (f == ConvPath::kWinograd && winograd_applies(g)) return ConvPath::kWinograd;
  if (f == ConvPath::kPlanes && use_planes(g)) return ConvPath::kPlanes;
  if (f == ConvPath::kColumns) return ConvPath::kColumns;
  if (winograd_applies(g)) return ConvPath::kWinograd;
  if (use_planes(g)) return ConvPath::kPlanes;
  return ConvPath::kColumns;
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

// The weight as one (O, C) matrix per tap: wt (taps, O, C) <- w (O, C, taps).
template <typename T>
std::vector<T> weight_per_tap(const ConvGeometry& g, const T* w) {
  const int64_t taps = g.kd * g.kh * g.kw;
  std::vector<T> wt(taps * g.o * g.c);
  for (int64_t oc = 0; oc < g.o; ++oc)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t t = 0; t < taps; ++t)
        wt[(t * g.o + oc) * g.c + c] = w[(oc * g.c + c) * taps + t];
  return wt;
}

// Forward over padded planes, one sample at a time: y (O, Q) = sum over taps t of
// wt[t] (O, C) @ window_t (C, Q), the window read in place with row stride `plane`.
template <typename T>
void forward_planes(const ConvGeometry& g, const ConvData<T>& a, int64_t n_begin, int64_t n_end) {
  const PlaneLayout p = plane_layout(g);
  const int64_t c = g.c, o = g.o;
  const int64_t x_stride = c * g.in_positions(), out_stride = o * g.out_positions();
  const std::vector<T> wt = weight_per_tap(g, a.w);
  std::vector<T> xp(p.buffer_size(g)), y(o * p.q);
  for (int64_t n = n_begin; n < n_end; ++n) {
    pad_planes(g, p, a.x + n * x_stride, xp.data());
    for (int64_t q0 = 0; q0 < p.q; q0 += kBlockCols) {
      const int64_t qb = std::min(kBlockCols, p.q - q0);
      for_each_tap(g, p, [&](int64_t t, int64_t off) {
        blas_gemm(false, false, o, qb, c, wt.data() + t * o * c, c, xp.data() + off + q0, p.plane,
                  T(t == 0 ? 0 : 1), y.data() + q0, p.q);
      });
    }
    planes2out(g, p, y.data(), a.bias, a.out + n * out_stride);
  }
}

// Input channels up to which a pointwise convolution's output row is computed directly.
constexpr int64_t kFewInputs = 8;

// out (O, L) = bias + w (O, K) x (K, L) for K <= kFewInputs (SpatialNorm's 1x1
// convolutions of the codes): with so few products per output a GEMM is a memory pass
// and the bias another. Here each output is summed in registers, bias first, then the
// products in input order, and written once. V is one vector of f32 lanes; AVX without
// FMA (pointwise_f32_avx), so no product is fused into its sum and every ISA gives the
// bits of the scalar loop.
template <typename V>
__attribute__((always_inline)) inline void pointwise_lanes(int64_t o, int64_t k, int64_t l,
                                                           const float* w, const float* bias,
                                                           const float* x, float* out) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  V wv[kFewInputs];
  for (int64_t oc = 0; oc < o; ++oc) {
    const float* wr = w + oc * k;
    const float b = bias ? bias[oc] : 0.0f;
    V bv;
    for (int64_t j = 0; j < kLanes; ++j) bv[j] = b;
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < kLanes; ++j) wv[kk][j] = wr[kk];
    float* d = out + oc * l;
    int64_t i = 0;
    for (; i + kLanes <= l; i += kLanes) {
      V acc = bv;
      for (int64_t kk = 0; kk < k; ++kk) acc = acc + wv[kk] * load_part<V>(x + kk * l + i, kLanes);
      std::memcpy(d + i, &acc, sizeof acc);
    }
    for (; i < l; ++i) {
      float acc = b;
      for (int64_t kk = 0; kk < k; ++kk) acc = acc + wr[kk] * x[kk * l + i];
      d[i] = acc;
    }
  }
}
__attribute__((target("avx"))) void pointwise_f32_avx(int64_t o, int64_t k, int64_t l,
                                                      const float* w, const float* bias,
                                                      const float* x, float* out) {
  pointwise_lanes<f32x8>(o, k, l, w, bias, x, out);
}

template <typename T>
void pointwise_few_inputs(int64_t o, int64_t k, int64_t l, const T* w, const T* bias, const T* x,
                          T* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_isa() != Isa::kSse2) return pointwise_f32_avx(o, k, l, w, bias, x, out);
    return pointwise_lanes<f32x4>(o, k, l, w, bias, x, out);
  } else {
    for (int64_t oc = 0; oc < o; ++oc) {
      T* d = out + oc * l;
      const T b = bias ? bias[oc] : T(0);
      for (int64_t i = 0; i < l; ++i) {
        T acc = b;
        for (int64_t kk = 0; kk < k; ++kk) acc = acc + w[oc * k + kk] * x[kk * l + i];
        d[i] = acc;
      }
    }
  }
}

// Forward for samples [n_begin, n_end), serially.
template <typename T>
void forward_range(const ConvGeometry& g, const ConvData<T>& a, int64_t n_begin, int64_t n_end) {
  const int64_t k = g.col_rows(), l = g.out_positions(), o = g.o;
  const int64_t x_stride = g.c * g.in_positions(), out_stride = o * l;
  const ConvPath path = choose_path(g);
  if (path == ConvPath::kWinograd)
    return winograd_forward(g, a.x + n_begin * x_stride, a.w, a.bias, n_end - n_begin,
                            a.out + n_begin * out_stride);
  if (path == ConvPath::kPlanes) return forward_planes(g, a, n_begin, n_end);
  const bool pointwise = g.is_pointwise();
  if (pointwise && k <= kFewInputs) {
    for (int64_t n = n_begin; n < n_end; ++n)
      pointwise_few_inputs(o, k, l, a.w, a.bias, a.x + n * x_stride, a.out + n * out_stride);
    return;
  }
  const int64_t nb = std::min(samples_per_chunk(g, l), n_end - n_begin);
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
    if (m == 1) {  // the GEMM result is already (O, L): written in place, then the bias
      // added after the whole sum, as below (a GEMM onto the bias, beta 1, would add it to
      // the first block of K's partial sums: other bits than a chunk of several samples).
      blas_gemm(false, false, o, l, k, a.w, k, colp, l, T(0), dst, l);
      if (a.bias)
        for (int64_t oc = 0; oc < o; ++oc)
          for (int64_t i = 0; i < l; ++i) dst[oc * l + i] += a.bias[oc];
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

// Backward over padded planes, one sample at a time, with G (O, Q) the output gradient
// in plane layout (zero in the wrap columns):
//   dW_t (O, C) += G @ window_t^T            (window_t of the padded input)
//   window_t of dX (C, Q) += wt[t]^T @ G     (accumulated in place in padded planes)
template <typename T>
void backward_planes(const ConvGeometry& g, const ConvData<T>& a, T* dw, int64_t n_begin,
                     int64_t n_end) {
  const PlaneLayout p = plane_layout(g);
  const int64_t c = g.c, o = g.o, taps = g.kd * g.kh * g.kw;
  const int64_t x_stride = c * g.in_positions(), out_stride = o * g.out_positions();
  const std::vector<T> wt = weight_per_tap(g, a.w);
  std::vector<T> xp(p.buffer_size(g)), gp(o * p.q), dwt(dw ? taps * o * c : 0);
  for (int64_t n = n_begin; n < n_end; ++n) {
    grad2planes(g, p, a.grad_out + n * out_stride, gp.data());
    if (dw) {
      pad_planes(g, p, a.x + n * x_stride, xp.data());
      for_each_tap(g, p, [&](int64_t t, int64_t off) {
        blas_gemm(false, true, o, c, p.q, gp.data(), p.q, xp.data() + off, p.plane,
                  T(n == n_begin ? 0 : 1), dwt.data() + t * o * c, c);
      });
    }
    if (a.grad_x) {  // xp now holds the input gradient in padded planes
      std::fill(xp.begin(), xp.end(), T(0));
      for (int64_t q0 = 0; q0 < p.q; q0 += kBlockCols) {
        const int64_t qb = std::min(kBlockCols, p.q - q0);
        for_each_tap(g, p, [&](int64_t t, int64_t off) {
          blas_gemm(true, false, c, qb, o, wt.data() + t * o * c, c, gp.data() + q0, p.q, T(1),
                    xp.data() + off + q0, p.plane);
        });
      }
      crop_planes(g, p, xp.data(), a.grad_x + n * x_stride);
    }
  }
  if (!dw) return;
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t t = 0; t < taps; ++t) dw[(oc * c + ci) * taps + t] = dwt[(t * o + oc) * c + ci];
}

// Backward for samples [n_begin, n_end), serially: grad_x of those samples (if wanted)
// and their weight gradient written (not added) to dw (if non-null).
template <typename T>
void backward_range(const ConvGeometry& g, const ConvData<T>& a, T* dw, int64_t n_begin,
                    int64_t n_end) {
  const int64_t k = g.col_rows(), l = g.out_positions(), o = g.o;
  const int64_t x_stride = g.c * g.in_positions(), out_stride = o * l;
  if (dw && n_begin == n_end) std::fill_n(dw, o * k, T(0));
  const ConvPath path = choose_path(g);
  if (n_begin < n_end && path == ConvPath::kWinograd) {
    const int64_t m = n_end - n_begin;
    const T* gm = a.grad_out + n_begin * out_stride;
    if (a.grad_x) winograd_backward_data(g, gm, a.w, m, a.grad_x + n_begin * x_stride);
    if (dw) winograd_backward_weight(g, a.x + n_begin * x_stride, gm, m, dw);
    return;
  }
  if (n_begin < n_end && path == ConvPath::kPlanes)
    return backward_planes(g, a, dw, n_begin, n_end);
  const int64_t nb = std::min(samples_per_chunk(g, l), std::max<int64_t>(n_end - n_begin, 1));
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

// The batch split over the threads in whole units of the path's chunks (a Winograd
// chunk's samples, a column chunk's; one sample over planes): each chunk holds the samples
// it holds in one serial pass, its GEMMs the same sizes, so the results have the serial
// bits at any thread count (a BLAS kernel's sums can depend on a product's size).
int64_t samples_per_unit(const ConvGeometry& g, int64_t elem_size) {
  switch (choose_path(g)) {
    case ConvPath::kWinograd:
      return winograd_samples_per_chunk(g, elem_size);
    case ConvPath::kPlanes:
      return 1;
    case ConvPath::kColumns:
      break;
  }
  return samples_per_chunk(g, g.out_positions());
}
struct SampleGroups {
  int64_t unit, units, count;
  SampleGroups(const ConvGeometry& g, int64_t groups, int64_t elem_size)
      : unit(samples_per_unit(g, elem_size)),
        units((g.n + unit - 1) / unit),
        count(std::min(groups, units)) {}
  // Group t's first sample (t = count: the batch's end).
  int64_t start(const ConvGeometry& g, int64_t t) const {
    return std::min(g.n, unit * (units * t / count));
  }
};

// Forward of an ungrouped convolution, the batch split over the threads.
template <typename T>
void forward_dense(const ConvGeometry& g, const ConvData<T>& a) {
  const SampleGroups sg(g, sample_groups(g), sizeof(T));
  if (sg.count <= 1) {
    forward_range(g, a, 0, g.n);
    return;
  }
  parallel_for(sg.count, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t t = g0; t < g1; ++t) forward_range(g, a, sg.start(g, t), sg.start(g, t + 1));
  });
}

// Input gradient (if a.grad_x) and weight gradient (if dw) of an ungrouped convolution,
// the batch split into the threads' groups, or into weight_slices when dw is wanted.
template <typename T>
void backward_dense(const ConvGeometry& g, const ConvData<T>& a, T* dw) {
  if (!a.grad_x && !dw) return;
  const SampleGroups sg(g, dw ? weight_slices(g) : sample_groups(g), sizeof(T));
  const int64_t groups = sg.count, wnum = g.o * g.col_rows();
  if (groups <= 1) {
    backward_range(g, a, dw, 0, g.n);
    return;
  }
  // Group 0 writes dw directly; the others write partial sums, added afterwards in a
  // fixed order so the result does not depend on scheduling.
  std::vector<T> partial(dw ? (groups - 1) * wnum : 0);
  parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t t = g0; t < g1; ++t) {
      T* target = !dw ? nullptr : (t == 0 ? dw : partial.data() + (t - 1) * wnum);
      backward_range(g, a, target, sg.start(g, t), sg.start(g, t + 1));
    }
  });
  if (!dw) return;
  parallel_for(wnum, 16384, [&](int64_t i0, int64_t i1) {
    for (int64_t t = 1; t < groups; ++t) {
      const T* src = partial.data() + (t - 1) * wnum;
      for (int64_t i = i0; i < i1; ++i) dw[i] += src[i];
    }
  });
}

// Channels [c0, c0 + cn) of each of n samples of `from_c` channels <-> a contiguous
// (n, cn, positions) buffer: a grouped convolution runs each group as an ungrouped one on
// such copies (one pass over the input and the output in all).
template <typename T>
void gather_channels(const T* from, int64_t from_c, int64_t c0, int64_t cn, int64_t n,
                     int64_t positions, T* to) {
  for (int64_t b = 0; b < n; ++b)
    std::memcpy(to + b * cn * positions, from + (b * from_c + c0) * positions,
                cn * positions * sizeof(T));
}
template <typename T>
void scatter_channels(const T* from, int64_t to_c, int64_t c0, int64_t cn, int64_t n,
                      int64_t positions, T* to) {
  for (int64_t b = 0; b < n; ++b)
    std::memcpy(to + (b * to_c + c0) * positions, from + b * cn * positions,
                cn * positions * sizeof(T));
}

// Group i's weights (O/G, C/G, k...) are rows [i*O/G, (i+1)*O/G) of the weight: contiguous.
template <typename T>
void forward_grouped(const ConvGeometry& g, const ConvData<T>& a) {
  const ConvGeometry s = g.group();
  const int64_t in_pos = g.in_positions(), out_pos = g.out_positions();
  std::vector<T> xs(g.n * s.c * in_pos), ys(g.n * s.o * out_pos);
  for (int64_t i = 0; i < g.groups; ++i) {
    gather_channels(a.x, g.c, i * s.c, s.c, g.n, in_pos, xs.data());
    ConvData<T> sa;
    sa.x = xs.data();
    sa.w = a.w + i * s.o * s.col_rows();
    sa.bias = a.bias ? a.bias + i * s.o : nullptr;
    sa.out = ys.data();
    forward_dense(s, sa);
    scatter_channels(ys.data(), g.o, i * s.o, s.o, g.n, out_pos, a.out);
  }
}

template <typename T>
void backward_grouped(const ConvGeometry& g, const ConvData<T>& a, T* dw) {
  const ConvGeometry s = g.group();
  const int64_t in_pos = g.in_positions(), out_pos = g.out_positions();
  std::vector<T> xs(dw ? g.n * s.c * in_pos : 0), gs(g.n * s.o * out_pos);
  std::vector<T> dxs(a.grad_x ? g.n * s.c * in_pos : 0);
  for (int64_t i = 0; i < g.groups; ++i) {
    if (dw) gather_channels(a.x, g.c, i * s.c, s.c, g.n, in_pos, xs.data());
    gather_channels(a.grad_out, g.o, i * s.o, s.o, g.n, out_pos, gs.data());
    ConvData<T> sa;
    sa.x = xs.data();
    sa.w = a.w + i * s.o * s.col_rows();
    sa.grad_out = gs.data();
    sa.grad_x = a.grad_x ? dxs.data() : nullptr;
    backward_dense(s, sa, dw ? dw + i * s.o * s.col_rows() : nullptr);
    if (a.grad_x) scatter_channels(dxs.data(), g.c, i * s.c, s.c, g.n, in_pos, a.grad_x);
  }
}

template <typename T>
void forward_impl(const ConvGeometry& g, const Tensor& out, const Tensor& x, const Tensor& weight,
                  const Tensor& bias) {
  ConvData<T> a;
  a.x = x.data<T>();
  a.w = weight.data<T>();
  a.bias = data_or_null<T>(bias);
  a.out = out.data<T>();
  if (depthwise_applies(g)) return depthwise_forward(g, a.x, a.w, a.bias, a.out);
  if (g.groups > 1) return forward_grouped(g, a);
  forward_dense(g, a);
}

template <typename T>
void backward_impl(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                   const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                   const Tensor& grad_bias) {
  ConvData<T> a;
  a.x = x.data<T>();
  a.w = weight.data<T>();
  a.grad_out = grad_out.data<T>();
  a.grad_x = data_or_null<T>(grad_x);
  const int64_t l = g.out_positions(), o = g.o;
  if (grad_bias.defined()) {  // db[o] = sum over (n, l): rows in double lanes (row_sum)
    // Channel blocks over the threads; within a block samples outer, so grad_out is read
    // in memory order, and each channel adds its rows in sample order (the same bits at
    // any thread count).
    std::vector<double> s(o, 0.0);
    parallel_for(o, grain_for(g.n * l), [&](int64_t c0, int64_t c1) {
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t oc = c0; oc < c1; ++oc) s[oc] += row_sum(a.grad_out + (n * o + oc) * l, l);
    });
    T* db = grad_bias.data<T>();
    for (int64_t oc = 0; oc < o; ++oc) db[oc] = T(s[oc]);
  }
  T* dw = data_or_null<T>(grad_weight);
  if (depthwise_applies(g)) {
    if (a.grad_x || dw) depthwise_backward(g, a.grad_out, a.x, a.w, a.grad_x, dw);
    return;
  }
  if (g.groups > 1) return backward_grouped(g, a, dw);
  backward_dense(g, a, dw);
}

}  // namespace

std::optional<ConvPath> parse_conv_path(const char* value) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  const std::string v = value;
  if (v == "winograd") return ConvPath::kWinograd;
  if (v == "planes") return ConvPath::kPlanes;
  if (v == "columns") return ConvPath::kColumns;
  ZT_FAIL("environment variable ZT_CONV_PATH='", v,
          "' is not a convolution path: use winograd, planes or columns, or leave it unset");
}

void conv_forward(const ConvGeometry& g, const Tensor& out, const Tensor& x, const Tensor& weight,
                  const Tensor& bias) {
  (void)forced_path();  // a bad $ZT_CONV_PATH throws here, on the calling thread
  dispatch_f32_f64(x.dtype(), "conv on CPU",
                   [&]<typename T>() { forward_impl<T>(g, out, x, weight, bias); });
}

void conv_backward(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                   const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                   const Tensor& grad_bias) {
  (void)forced_path();  // a bad $ZT_CONV_PATH throws here, on the calling thread
  dispatch_f32_f64(x.dtype(), "conv backward on CPU", [&]<typename T>() {
    backward_impl<T>(g, grad_out, x, weight, grad_x, grad_weight, grad_bias);
  });
}

}  // namespace zt::cpu
