// Column matrices of the CPU convolution: exact columns (vol2col / col2vol) and the
// padded-plane layout of stride-1 convolutions. See conv_cols.h for both layouts.
#include "core/cpu/conv_cols.h"

#include <algorithm>
#include <cstring>

namespace zt::cpu {

namespace {

// One column-matrix row: kernel tap of channel c at input offsets (i, j, k) from a
// window's origin (the tap's indices times the dilations), with its valid output spans.
struct Tap {
  int64_t c, i, j, k;
  Span sd, sh, sw;
};
Tap make_tap(const ConvGeometry& g, int64_t r) {
  int64_t kvol = g.kd * g.kh * g.kw, t = r % kvol;
  Tap p{r / kvol, t / (g.kh * g.kw) * g.dd, (t / g.kw) % g.kh * g.dh, t % g.kw * g.dw, {}, {}, {}};
  p.sd = valid_span(p.i, g.sd, g.pad_d, g.d, g.od);
  p.sh = valid_span(p.j, g.sh, g.pad_h, g.h, g.oh);
  p.sw = valid_span(p.k, g.sw, g.pad_w, g.w, g.ow);
  return p;
}

}  // namespace

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

// ---------------------------------------------------------------- padded planes

PlaneLayout plane_layout(const ConvGeometry& g) {
  // Back padding of W (stride 1): the padded width is Wo + kw - 1 = pad_w + W + back.
  const int64_t back_w = g.ow + g.kw - 1 - g.pad_w - g.w;
  PlaneLayout p;
  p.dp = g.od + g.kd - 1;
  p.hp = g.oh + g.kh - 1;
  // Rows share padding columns, but must still hold every output column (kw = 1 with
  // padding has Wo > W + max pad).
  p.wp = std::max(g.w + std::max(g.pad_w, back_w), g.ow);
  p.plane = p.dp * p.hp * p.wp;
  p.q = ((g.od - 1) * p.hp + g.oh) * p.wp;
  // The last window reaches tap_offset(kd-1, kh-1, kw-1) + q - 1, at most one row plus
  // kw past the end of its plane.
  p.slack = p.wp + g.kw;
  return p;
}

bool use_planes(const ConvGeometry& g) {
  if (g.sd != 1 || g.sh != 1 || g.sw != 1 || !g.is_dense() || g.is_pointwise()) return false;
  const int64_t back_w = g.ow + g.kw - 1 - g.pad_w - g.w;
  if (back_w < 0 || g.pad_d + g.d > g.od + g.kd - 1 || g.pad_h + g.h > g.oh + g.kh - 1)
    return false;
  return 2 * plane_layout(g).q <= 3 * g.out_positions();
}

template <typename T>
void pad_planes(const ConvGeometry& g, const PlaneLayout& p, const T* x, T* xp) {
  std::fill_n(xp, p.buffer_size(g), T(0));
  const int64_t hw = g.h * g.w;
  for (int64_t c = 0; c < g.c; ++c) {
    const T* src = x + c * g.in_positions();
    T* dst = xp + c * p.plane + (g.pad_d * p.hp + g.pad_h) * p.wp + g.pad_w;
    for (int64_t d = 0; d < g.d; ++d)
      for (int64_t h = 0; h < g.h; ++h)
        std::copy_n(src + d * hw + h * g.w, g.w, dst + (d * p.hp + h) * p.wp);
  }
}

template <typename T>
void crop_planes(const ConvGeometry& g, const PlaneLayout& p, const T* dxp, T* dx) {
  const int64_t hw = g.h * g.w;
  for (int64_t c = 0; c < g.c; ++c) {
    const T* src = dxp + c * p.plane + (g.pad_d * p.hp + g.pad_h) * p.wp + g.pad_w;
    T* dst = dx + c * g.in_positions();
    for (int64_t d = 0; d < g.d; ++d)
      for (int64_t h = 0; h < g.h; ++h)
        std::copy_n(src + (d * p.hp + h) * p.wp, g.w, dst + d * hw + h * g.w);
  }
}

template <typename T>
void planes2out(const ConvGeometry& g, const PlaneLayout& p, const T* y, const T* bias, T* out) {
  const int64_t l = g.out_positions(), hw = g.oh * g.ow;
  for (int64_t oc = 0; oc < g.o; ++oc) {
    const T bv = bias ? bias[oc] : T(0);
    const T* src = y + oc * p.q;
    T* dst = out + oc * l;
    for (int64_t d = 0; d < g.od; ++d)
      for (int64_t h = 0; h < g.oh; ++h) {
        const T* s = src + (d * p.hp + h) * p.wp;
        T* o = dst + d * hw + h * g.ow;
        for (int64_t w = 0; w < g.ow; ++w) o[w] = s[w] + bv;
      }
  }
}

template <typename T>
void grad2planes(const ConvGeometry& g, const PlaneLayout& p, const T* grad_out, T* gp) {
  const int64_t l = g.out_positions(), hw = g.oh * g.ow;
  std::fill_n(gp, g.o * p.q, T(0));
  for (int64_t oc = 0; oc < g.o; ++oc) {
    const T* src = grad_out + oc * l;
    T* dst = gp + oc * p.q;
    for (int64_t d = 0; d < g.od; ++d)
      for (int64_t h = 0; h < g.oh; ++h)
        std::copy_n(src + d * hw + h * g.ow, g.ow, dst + (d * p.hp + h) * p.wp);
  }
}

#define ZT_CONV_COLS_INSTANTIATE(T)                                                             \
  template void vol2col<T>(const ConvGeometry&, const T*, int64_t, T*);                         \
  template void col2vol<T>(const ConvGeometry&, const T*, int64_t, T*);                         \
  template void pad_planes<T>(const ConvGeometry&, const PlaneLayout&, const T*, T*);           \
  template void crop_planes<T>(const ConvGeometry&, const PlaneLayout&, const T*, T*);          \
  template void planes2out<T>(const ConvGeometry&, const PlaneLayout&, const T*, const T*, T*); \
  template void grad2planes<T>(const ConvGeometry&, const PlaneLayout&, const T*, T*);
ZT_CONV_COLS_INSTANTIATE(float)
ZT_CONV_COLS_INSTANTIATE(double)
#undef ZT_CONV_COLS_INSTANTIATE

}  // namespace zt::cpu
