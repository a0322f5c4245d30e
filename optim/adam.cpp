// Adam/AdamW update: a fused loop for contiguous CPU f32/f64 tensors (one pass, no
// temporaries), core's ops elsewhere. The arithmetic runs in the tensor's own type.
#include "optim/adam.h"

#include <cmath>

namespace zt::optim {

namespace {
// The constants of one Adam step in the parameter's type.
template <typename T>
struct AdamStep {
  T beta1, beta2, l2, decay, step_size, inv_sqrt_bc2, eps;
};

// One pass over n elements. The four arrays are distinct tensors (no aliasing), which
// lets the loop vectorize, sqrt and division included.
template <typename T>
void adam_rows(const AdamStep<T>& k, T* __restrict p, const T* __restrict g, T* __restrict m,
               T* __restrict v, int64_t n) {
  const T omb1 = 1 - k.beta1, omb2 = 1 - k.beta2;
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i] + k.l2 * p[i];
    const T mi = k.beta1 * m[i] + omb1 * gi;
    const T vi = k.beta2 * v[i] + omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * k.decay - k.step_size * mi / (std::sqrt(vi) * k.inv_sqrt_bc2 + k.eps);
  }
}
}  // namespace

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
      const AdamStep<T> k{static_cast<T>(b1),        static_cast<T>(b2),
                          static_cast<T>(l2),        static_cast<T>(decay),
                          static_cast<T>(step_size), static_cast<T>(inv_sqrt_bc2),
                          static_cast<T>(eps)};
      T* pp = p.data<T>();
      const T* gp = g.data<T>();
      T* mp = m.data<T>();
      T* vp = v.data<T>();
      parallel_for(p.numel(), 1 << 13, [&](int64_t b, int64_t e) {
        adam_rows(k, pp + b, gp + b, mp + b, vp + b, e - b);
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
