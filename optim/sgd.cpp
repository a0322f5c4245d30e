// SGD update: a fused loop for contiguous CPU f32/f64 tensors, core's in-place ops for
// everything else (CUDA tensors, other layouts). Both compute the same formula.
#include "optim/sgd.h"

namespace zt::optim {

SGD::SGD(NamedTensors params, const SGDOptions& o)
    : Optimizer(std::move(params), o.lr(), {"momentum_buffer"}), options_(o) {
  ZT_CHECK(o.momentum() >= 0, "SGD: momentum must be >= 0, got ", o.momentum());
  ZT_CHECK(o.weight_decay() >= 0, "SGD: weight_decay must be >= 0, got ", o.weight_decay());
  ZT_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0),
           "SGD: nesterov needs momentum > 0 and dampening 0");
}

void SGD::update(const Tensor& p, const Tensor& g, ParamState& st) {
  const double lr = this->lr(), mom = options_.momentum(), damp = options_.dampening(),
               wd = options_.weight_decay();
  const bool nesterov = options_.nesterov();
  bool first = false;
  Tensor buf = mom != 0 ? slot(st, "momentum_buffer", p, &first) : Tensor();

  std::vector<Tensor> others{g};
  if (buf.defined()) others.push_back(buf);
  if (cpu_fast_path(p, others)) {
    auto run = [&]<typename T>() {
      T* pp = p.data<T>();
      const T* gp = g.data<T>();
      T* bp = buf.defined() ? buf.data<T>() : nullptr;
      parallel_for(p.numel(), 1 << 14, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          T d = gp[i] + static_cast<T>(wd) * pp[i];
          if (bp) {
            bp[i] = first ? d : static_cast<T>(mom) * bp[i] + static_cast<T>(1 - damp) * d;
            d = nesterov ? d + static_cast<T>(mom) * bp[i] : bp[i];
          }
          pp[i] -= static_cast<T>(lr) * d;
        }
      });
    };
    if (p.dtype() == DType::f32)
      run.template operator()<float>();
    else
      run.template operator()<double>();
    return;
  }
  Tensor d = wd != 0 ? add_scaled(g, p, wd) : g;
  if (buf.defined()) {
    if (first) {
      buf.copy_(d);
    } else {
      mul_(buf, mom);
      add_(buf, d, 1 - damp);
    }
    d = nesterov ? add_scaled(d, buf, mom) : buf;
  }
  add_(p, d, -lr);
}

}  // namespace zt::optim
