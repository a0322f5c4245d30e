// Depthwise CPU convolution (groups == C: each output channel reads one input channel),
// computed directly instead of as one GEMM per group (which would be 1 x taps x L GEMMs).
// Stride-1 undilated ones copy each channel into a zero-padded plane (conv_cols.h's
// layout) and run each tap as one multiply-add over all Q output positions from the
// tap's offset, a long loop that vectorizes; the wrap columns' garbage is dropped (and
// their gradient is zero) as in the GEMM path. Others run, per tap and per output row
// whose input row exists, one strided multiply-add over the row's valid columns
// (valid_span). Output and input-gradient planes are split over the threads; each
// channel's weight gradient is summed by one thread in a fixed order (per sample and tap,
// eight lanes combined in double), so the bits do not depend on the thread count.
// Legend as in ConvGeometry (core/kernels.h); m = O / C output channels per input channel.
#include "core/cpu/conv_depthwise.h"

#include <algorithm>
#include <vector>

#include "core/cpu/conv_cols.h"
#include "core/cpu/loops.h"
#include "core/parallel.h"

namespace zt::cpu {

namespace {

// Calls fn(tap, x_offset, out_offset, lo, hi) for every tap and every output row (od, oh)
// that the tap reads from inside the input: output columns [lo, hi) of that row read
// input elements x_offset + ow * sw of one input plane, and write out_offset + ow of one
// output plane.
template <typename Fn>
void for_each_row(const ConvGeometry& g, Fn&& fn) {
  int64_t tap = 0;
  for (int64_t i = 0; i < g.kd; ++i)
    for (int64_t j = 0; j < g.kh; ++j)
      for (int64_t k = 0; k < g.kw; ++k, ++tap) {
        const Span sd = valid_span(i * g.dd, g.sd, g.pad_d, g.d, g.od);
        const Span sh = valid_span(j * g.dh, g.sh, g.pad_h, g.h, g.oh);
        const Span sw = valid_span(k * g.dw, g.sw, g.pad_w, g.w, g.ow);
        if (sw.lo >= sw.hi) continue;
        for (int64_t od = sd.lo; od < sd.hi; ++od)
          for (int64_t oh = sh.lo; oh < sh.hi; ++oh) {
            const int64_t zi = od * g.sd + i * g.dd - g.pad_d;
            const int64_t yi = oh * g.sh + j * g.dh - g.pad_h;
            const int64_t x_offset = (zi * g.h + yi) * g.w + k * g.dw - g.pad_w;
            fn(tap, x_offset, (od * g.oh + oh) * g.ow, sw.lo, sw.hi);
          }
      }
}

// One channel of g: the geometry the padded-plane helpers (conv_cols.h) work on.
ConvGeometry single_channel(const ConvGeometry& g) {
  ConvGeometry one = g;
  one.n = 1;
  one.c = one.o = 1;
  one.groups = 1;
  return one;
}

// sum a[i] b[i] over [0, n) in kLanes independent partial sums (a loop the compiler
// vectorizes; a single running sum would be a serial chain), combined in double.
template <typename T>
double dot_lanes(const T* a, const T* b, int64_t n) {
  constexpr int64_t kLanes = 8;
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  for (int64_t j = 0; j < kLanes; ++j) s += static_cast<double>(acc[j]);
  return s;
}

}  // namespace

bool depthwise_applies(const ConvGeometry& g) {
  return g.groups > 1 && g.groups == g.c;
}

template <typename T>
void depthwise_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* out) {
  const int64_t taps = g.kd * g.kh * g.kw, m = g.o / g.c;
  const int64_t in_pos = g.in_positions(), out_pos = g.out_positions();
  const ConvGeometry one = single_channel(g);
  const bool planes = use_planes(one);
  parallel_for(g.n * g.o, grain_for(taps * out_pos), [&](int64_t p0, int64_t p1) {
    const PlaneLayout pl = planes ? plane_layout(one) : PlaneLayout{};
    std::vector<T> xp(planes ? pl.buffer_size(one) : 0), y(planes ? pl.q : 0);
    for (int64_t p = p0; p < p1; ++p) {  // p = (sample, output channel)
      const int64_t oc = p % g.o;
      const T* xc = x + (p / g.o * g.c + oc / m) * in_pos;
      const T* wc = w + oc * taps;
      T* yc = out + p * out_pos;
      if (planes) {  // y (Q) = sum over taps of w_t * (the padded plane from the tap's offset)
        pad_planes(one, pl, xc, xp.data());
        std::fill(y.begin(), y.end(), T(0));
        for_each_tap(one, pl, [&](int64_t t, int64_t off) {
          const T wv = wc[t];
          const T* src = xp.data() + off;
          for (int64_t q = 0; q < pl.q; ++q) y[q] += wv * src[q];
        });
        planes2out(one, pl, y.data(), bias ? bias + oc : nullptr, yc);
        continue;
      }
      std::fill_n(yc, out_pos, bias ? bias[oc] : T(0));
      for_each_row(g, [&](int64_t t, int64_t xo, int64_t yo, int64_t lo, int64_t hi) {
        const T wv = wc[t];
        const T* xr = xc + xo;
        T* yr = yc + yo;
        for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * g.sw];
      });
    }
  });
}

template <typename T>
void depthwise_backward(const ConvGeometry& g, const T* grad_out, const T* x, const T* w, T* grad_x,
                        T* grad_w) {
  const int64_t taps = g.kd * g.kh * g.kw, m = g.o / g.c;
  const int64_t in_pos = g.in_positions(), out_pos = g.out_positions();
  const ConvGeometry one = single_channel(g);
  const bool planes = use_planes(one);
  if (grad_x) {  // per (sample, input channel): the sum over its m output channels
    parallel_for(g.n * g.c, grain_for(m * taps * out_pos), [&](int64_t p0, int64_t p1) {
      const PlaneLayout pl = planes ? plane_layout(one) : PlaneLayout{};
      std::vector<T> dxp(planes ? pl.buffer_size(one) : 0), gp(planes ? pl.q : 0);
      for (int64_t p = p0; p < p1; ++p) {  // p = (sample, input channel)
        const int64_t n = p / g.c, ic = p % g.c;
        T* dx = grad_x + p * in_pos;
        if (planes) std::fill(dxp.begin(), dxp.end(), T(0));
        if (!planes) std::fill_n(dx, in_pos, T(0));
        for (int64_t oc = ic * m; oc < (ic + 1) * m; ++oc) {
          const T* gy = grad_out + (n * g.o + oc) * out_pos;
          if (planes) {  // the forward's adjoint: each tap adds w_t * G from its offset
            grad2planes(one, pl, gy, gp.data());
            for_each_tap(one, pl, [&](int64_t t, int64_t off) {
              const T wv = w[oc * taps + t];
              T* dst = dxp.data() + off;
              for (int64_t q = 0; q < pl.q; ++q) dst[q] += wv * gp[q];
            });
            continue;
          }
          for_each_row(g, [&](int64_t t, int64_t xo, int64_t yo, int64_t lo, int64_t hi) {
            const T wv = w[oc * taps + t];
            T* dr = dx + xo;
            const T* gr = gy + yo;
            for (int64_t ow = lo; ow < hi; ++ow) dr[ow * g.sw] += wv * gr[ow];
          });
        }
        if (planes) crop_planes(one, pl, dxp.data(), dx);
      }
    });
  }
  if (!grad_w) return;
  parallel_for(g.o, grain_for(g.n * taps * out_pos), [&](int64_t c0, int64_t c1) {
    const PlaneLayout pl = planes ? plane_layout(one) : PlaneLayout{};
    std::vector<T> xp(planes ? pl.buffer_size(one) : 0), gp(planes ? pl.q : 0);
    std::vector<double> acc(taps);
    for (int64_t oc = c0; oc < c1; ++oc) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < g.n; ++n) {
        const T* xc = x + (n * g.c + oc / m) * in_pos;
        const T* gy = grad_out + (n * g.o + oc) * out_pos;
        if (planes) {  // dw_t = sum over q of G[q] * (the padded plane from the tap's offset)
          pad_planes(one, pl, xc, xp.data());
          grad2planes(one, pl, gy, gp.data());
          for_each_tap(one, pl, [&](int64_t t, int64_t off) {
            acc[t] += dot_lanes(gp.data(), xp.data() + off, pl.q);
          });
          continue;
        }
        for_each_row(g, [&](int64_t t, int64_t xo, int64_t yo, int64_t lo, int64_t hi) {
          const T* xr = xc + xo;
          const T* gr = gy + yo;
          if (g.sw == 1) {
            acc[t] += dot_lanes(gr + lo, xr + lo, hi - lo);
            return;
          }
          T s = 0;
          for (int64_t ow = lo; ow < hi; ++ow) s += gr[ow] * xr[ow * g.sw];
          acc[t] += static_cast<double>(s);
        });
      }
      for (int64_t t = 0; t < taps; ++t) grad_w[oc * taps + t] = T(acc[t]);
    }
  });
}

template void depthwise_forward<float>(const ConvGeometry&, const float*, const float*,
                                       const float*, float*);
template void depthwise_forward<double>(const ConvGeometry&, const double*, const double*,
                                        const double*, double*);
template void depthwise_backward<float>(const ConvGeometry&, const float*, const float*,
                                        const float*, float*, float*);
template void depthwise_backward<double>(const ConvGeometry&, const double*, const double*,
                                         const double*, double*, double*);

}  // namespace zt::cpu
