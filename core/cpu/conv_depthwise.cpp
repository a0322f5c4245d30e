// Depthwise CPU convolution (groups == C: each output channel reads one input channel),
// computed directly instead of as one GEMM per group (which would be 1 x taps x L GEMMs).
// For each tap and each output row whose input row exists, one strided multiply-add over
// the row's valid output columns (valid_span): no column matrix, no bounds checks in the
// inner loop, which vectorizes at stride 1. Output and input-gradient planes are split
// over the threads; each channel's weight gradient is summed by one thread in a fixed
// order (samples, rows) in double, so the bits do not depend on the thread count.
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

}  // namespace

bool depthwise_applies(const ConvGeometry& g) {
  return g.groups > 1 && g.groups == g.c;
}

template <typename T>
void depthwise_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* out) {
  const int64_t taps = g.kd * g.kh * g.kw, m = g.o / g.c;
  const int64_t in_pos = g.in_positions(), out_pos = g.out_positions();
  parallel_for(g.n * g.o, grain_for(taps * out_pos), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {  // p = (sample, output channel)
      const int64_t oc = p % g.o;
      const T* xp = x + (p / g.o * g.c + oc / m) * in_pos;
      const T* wp = w + oc * taps;
      T* yp = out + p * out_pos;
      std::fill_n(yp, out_pos, bias ? bias[oc] : T(0));
      for_each_row(g, [&](int64_t t, int64_t xo, int64_t yo, int64_t lo, int64_t hi) {
        const T wv = wp[t];
        const T* xr = xp + xo;
        T* yr = yp + yo;
        if (g.sw == 1) {
          for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow];
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * g.sw];
        }
      });
    }
  });
}

template <typename T>
void depthwise_backward(const ConvGeometry& g, const T* grad_out, const T* x, const T* w, T* grad_x,
                        T* grad_w) {
  const int64_t taps = g.kd * g.kh * g.kw, m = g.o / g.c;
  const int64_t in_pos = g.in_positions(), out_pos = g.out_positions();
  if (grad_x) {  // per (sample, input channel): the sum over its m output channels
    parallel_for(g.n * g.c, grain_for(m * taps * out_pos), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {  // p = (sample, input channel)
        const int64_t n = p / g.c, ic = p % g.c;
        T* dx = grad_x + p * in_pos;
        std::fill_n(dx, in_pos, T(0));
        for (int64_t oc = ic * m; oc < (ic + 1) * m; ++oc) {
          const T* gy = grad_out + (n * g.o + oc) * out_pos;
          for_each_row(g, [&](int64_t t, int64_t xo, int64_t yo, int64_t lo, int64_t hi) {
            const T wv = w[oc * taps + t];
            T* dr = dx + xo;
            const T* gr = gy + yo;
            for (int64_t ow = lo; ow < hi; ++ow) dr[ow * g.sw] += wv * gr[ow];
          });
        }
      }
    });
  }
  if (!grad_w) return;
  parallel_for(g.o, grain_for(g.n * taps * out_pos), [&](int64_t c0, int64_t c1) {
    std::vector<double> acc(taps);
    for (int64_t oc = c0; oc < c1; ++oc) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < g.n; ++n) {
        const T* xp = x + (n * g.c + oc / m) * in_pos;
        const T* gy = grad_out + (n * g.o + oc) * out_pos;
        for_each_row(g, [&](int64_t t, int64_t xo, int64_t yo, int64_t lo, int64_t hi) {
          const T* xr = xp + xo;
          const T* gr = gy + yo;
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
