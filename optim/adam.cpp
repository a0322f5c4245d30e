// Adam/AdamW update: a fused loop for contiguous CPU f32/f64 tensors (one pass, no
// temporaries), core's ops elsewhere. The arithmetic runs in the tensor's own type.
#include "optim/adam.h"

#include <cmath>

namespace zt::optim {

Adam::Adam(NamedTensors params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), o.lr(), {"exp_avg", "exp_avg_sq"}),
      options_(o),
      decoupled_(decoupled) {
  ZT_CHECK(o.beta1() >= 0 && o.beta1() < 1 && o.beta2() >= 0 && o.beta2() < 1,
           "Adam: betas must be in [0, 1), got (", o.beta1(), ", ", o.beta2(), ")");
  ZT_CHECK(o.eps() >= 0, "Adam: eps must be >= 0, got ", o.eps());
  ZT_CHECK(o.weight_decay() >= 0, "Adam: weight_decay must be >= 0, got ", o.weight_decay());
}

void Adam::update(const Tensor& p, const Tensor& g, ParamState& st) {
  const double lr = this->lr(), b1 = options_.beta1(), b2 = options_.beta2(), eps = options_.eps(),
               wd = options_.weight_decay();
  const double t = static_cast<double>(st.step);
  const double step_size = lr / (1 - std::pow(b1, t));
  const double inv_sqrt_bc2 = 1.0 / std::sqrt(1 - std::pow(b2, t));
  const double decay = decoupled_ ? 1 - lr * wd : 1.0;
  const double l2 = decoupled_ ? 0.0 : wd;
  Tensor m = slot(st, "exp_avg", p);
  Tensor v = slot(st, "exp_avg_sq", p);

  if (cpu_fast_path(p, {g, m, v})) {
    auto run = [&]<typename T>() {
      // Four distinct tensors: no aliasing, so the loop vectorizes without run-time checks.
      T* __restrict pp = p.data<T>();
      const T* __restrict gp = g.data<T>();
      T* __restrict mp = m.data<T>();
      T* __restrict vp = v.data<T>();
      const T cb1 = static_cast<T>(b1), cb2 = static_cast<T>(b2), cl2 = static_cast<T>(l2),
              cdecay = static_cast<T>(decay), cstep = static_cast<T>(step_size),
              cbc2 = static_cast<T>(inv_sqrt_bc2), ceps = static_cast<T>(eps);
      parallel_for(p.numel(), 1 << 13, [&](int64_t b, int64_t e) {
        const T omb1 = 1 - cb1, omb2 = 1 - cb2;
        for (int64_t i = b; i < e; ++i) {
          const T gi = gp[i] + cl2 * pp[i];
          const T mi = cb1 * mp[i] + omb1 * gi;
          const T vi = cb2 * vp[i] + omb2 * gi * gi;
          mp[i] = mi;
          vp[i] = vi;
          pp[i] = pp[i] * cdecay - cstep * mi / (std::sqrt(vi) * cbc2 + ceps);
        }
      });
    };
    if (p.dtype() == DType::f32)
      run.template operator()<float>();
    else
      run.template operator()<double>();
    return;
  }
  Tensor gi = l2 != 0 ? add_scaled(g, p, l2) : g;
  if (decay != 1.0) mul_(p, decay);
  mul_(m, b1);
  add_(m, gi, 1 - b1);
  mul_(v, b2);
  add_(v, mul(gi, gi), 1 - b2);
  Tensor denom = add(mul(sqrt(v), inv_sqrt_bc2), eps);
  add_(p, div(m, denom), -step_size);
}

}  // namespace zt::optim
