// A direct (nested-loop) 3-D convolution in f64: the specification the conv tests
// compare conv2d / conv3d against (a 2-D case is a 3-D one of depth 1); conv2d with its
// gradients at a given thread count; and the Winograd kernels' results, which tell
// whether conv2d took that path.
#pragma once

#include <array>
#include <vector>

#include "core/cpu/winograd.h"
#include "core/ops.h"
#include "core/parallel.h"

namespace zt::test {

/// x (N, C, D, H, W), w (O, C/groups, kd, kh, kw), bias (O) or undefined; stride s,
/// front/top/left padding p0, output sizes `os` (Do, Ho, Wo), tap spacing `dil`.
/// Output channel oc of group oc / (O/groups) reads that group's C/groups input channels.
inline Tensor reference_conv3d(const Tensor& x, const Tensor& w, const Tensor& bias,
                               std::array<int64_t, 3> s, std::array<int64_t, 3> p0,
                               std::array<int64_t, 3> os, std::array<int64_t, 3> dil = {1, 1, 1},
                               int64_t groups = 1) {
  Tensor xc = x.detach().to(DType::f64).contiguous(), wc = w.detach().to(DType::f64).contiguous();
  const int64_t n = x.size(0), c = x.size(1), o = w.size(0), cg = w.size(1);
  const int64_t d = x.size(2), h = x.size(3), wd = x.size(4);
  const int64_t kd = w.size(2), kh = w.size(3), kw = w.size(4);
  std::vector<double> xv = xc.to_vector(), wv = wc.to_vector();
  std::vector<double> bv = bias.defined() ? bias.to_vector() : std::vector<double>(o, 0.0);
  std::vector<double> out(n * o * os[0] * os[1] * os[2]);
  size_t idx = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t z = 0; z < os[0]; ++z)
        for (int64_t y = 0; y < os[1]; ++y)
          for (int64_t xx = 0; xx < os[2]; ++xx) {
            double acc = bv[oc];
            const int64_t c0 = oc / (o / groups) * cg;
            for (int64_t gc = 0; gc < cg; ++gc)
              for (int64_t i = 0; i < kd; ++i)
                for (int64_t j = 0; j < kh; ++j)
                  for (int64_t k = 0; k < kw; ++k) {
                    int64_t zi = z * s[0] + i * dil[0] - p0[0], yi = y * s[1] + j * dil[1] - p0[1],
                            xi = xx * s[2] + k * dil[2] - p0[2];
                    if (zi < 0 || zi >= d || yi < 0 || yi >= h || xi < 0 || xi >= wd) continue;
                    acc += xv[(((b * c + c0 + gc) * d + zi) * h + yi) * wd + xi] *
                           wv[(((oc * cg + gc) * kd + i) * kh + j) * kw + k];
                  }
            out[idx++] = acc;
          }
  return from_vector(out, {n, o, os[0], os[1], os[2]}, DType::f64);
}

/// conv2d(x, w, b, a) and its gradients to x, w and b from upstream `go`, computed with
/// `threads` kernel threads (the count is restored after): {y, dx, dw, db}.
inline std::vector<Tensor> conv2d_on_threads(int threads, const Tensor& x, const Tensor& w,
                                             const Tensor& b, const Tensor& go,
                                             const Conv2dArgs& a) {
  const int prev = num_threads();
  set_num_threads(threads);
  Tensor xl = x.clone().set_requires_grad(true), wl = w.clone().set_requires_grad(true),
         bl = b.clone().set_requires_grad(true);
  Tensor y = conv2d(xl, wl, bl, a);
  y.backward(go);
  set_num_threads(prev);
  return {y, xl.grad(), wl.grad(), bl.grad()};
}

// The output (of shape `out`), and with an upstream gradient go also the input and weight
// gradients, that the Winograd kernels (core/cpu/winograd.h) compute for conv(x, w, b) over
// the whole batch, in x's dtype (f32 or f64). A pass over the whole batch cuts the chunks
// conv2d / conv3d cut, so where those take the Winograd path their results have these
// bits; the other paths round differently.
inline std::vector<Tensor> winograd_kernels(ConvGeometry g, const Tensor& x, const Tensor& w,
                                            const Tensor& b, const Shape& out,
                                            const Tensor& go = {}) {
  g.n = x.size(0);
  const Tensor xc = x.contiguous(), wc = w.contiguous(), bc = b.defined() ? b.contiguous() : b;
  std::vector<Tensor> r{Tensor::empty(out, x.dtype())};
  auto run = [&]<typename T>() {
    cpu::winograd_forward<T>(g, xc.data<T>(), wc.data<T>(), bc.defined() ? bc.data<T>() : nullptr,
                             g.n, r[0].data<T>());
    if (!go.defined()) return;
    const Tensor gc = go.contiguous();
    r.push_back(Tensor::empty(x.sizes(), x.dtype()));
    r.push_back(Tensor::empty(w.sizes(), w.dtype()));
    cpu::winograd_backward_data<T>(g, gc.data<T>(), wc.data<T>(), g.n, r[1].data<T>());
    cpu::winograd_backward_weight<T>(g, xc.data<T>(), gc.data<T>(), g.n, r[2].data<T>());
  };
  if (x.dtype() == DType::f64)
    run.operator()<double>();
  else
    run.operator()<float>();
  return r;
}

}  // namespace zt::test
