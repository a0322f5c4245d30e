// SGD update: the fused sgd_update (core/ops/optim.h) for contiguous f32/f64 tensors on the CPU or
// a GPU (one call per group of parameters that share a device, dtype, copy dtype,
// first-step flag and settings), core's in-place ops for everything else. Both compute one formula.
#include "optim/sgd.h"

#include <cmath>

namespace zt::optim {

SGD::SGD(NamedTensors params, const SGDOptions& o)
    : Optimizer(std::move(params), checked_lr("SGD", o.lr()), o.weight_decay(),
                {"momentum_buffer"}),
      options_(o) {
  // PyTorch's ranges (momentum and dampening past 1 are allowed), finite.
  ZT_CHECK(std::isfinite(o.momentum()) && o.momentum() >= 0,
           "SGD: momentum must be finite and >= 0, got ", o.momentum());
  ZT_CHECK(std::isfinite(o.dampening()), "SGD: dampening must be finite, got ", o.dampening());
  ZT_CHECK(std::isfinite(o.weight_decay()) && o.weight_decay() >= 0,
           "SGD: weight_decay must be finite and >= 0, got ", o.weight_decay());
  ZT_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0),
           "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", o.momentum(),
           " and dampening ", o.dampening());
}

std::map<std::string, double> SGD::hyper_parameters() const {
  return {{"momentum", options_.momentum()},
          {"dampening", options_.dampening()},
          {"nesterov", options_.nesterov() ? 1.0 : 0.0},
          {"weight_decay", options_.weight_decay()}};
}

void SGD::update_many(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<ParamState*>& states, const std::vector<Tensor>& copies) {
  const SGDOptions& o = options_;
  const bool with_buf = o.momentum() != 0;
  update_fused(
      params, grads, states, copies,
      [&](size_t i) {
        bool first = false;
        Tensor buf = with_buf ? slot(*states[i], "momentum_buffer", params[i], &first) : Tensor();
        return FusedEntry{{buf}, first ? 1 : 0};
      },
      [&](size_t i, const FusedEntry& e) {
        update_generic(params[i], grads[i], e.slots[0], e.step_key != 0, states[i]->settings);
      },
      // (The first-step flag is never set while capturing: slot() refuses.)
      [this](const FusedGroup& gr) {
        const bool first = gr.step_key != 0;
        const double scale = gr.state->settings.lr_scale;
        return [this, first, scale] {
          return std::vector<double>{lr() * scale, first ? 1.0 : 0.0};
        };
      },
      [&](const FusedGroup& gr, const Tensor& on_device) {
        const ParamSettings& s = gr.state->settings;
        sgd_update(gr.p, gr.g, gr.slots[0], gr.copy, lr() * s.lr_scale, o.momentum(), o.dampening(),
                   s.weight_decay, o.nesterov(), gr.step_key != 0, on_device);
      });
}

void SGD::update(const Tensor& p, const Tensor& g, ParamState& st) {
  update_many({p}, {g}, {&st}, {Tensor()});
}

void SGD::update_generic(const Tensor& p, const Tensor& g, const Tensor& buf, bool first,
                         const ParamSettings& s) {
  const double lr = this->lr() * s.lr_scale, mom = options_.momentum(), damp = options_.dampening(),
               wd = s.weight_decay;
  Tensor d = wd != 0 ? add_scaled(g, p, wd) : g;
  if (buf.defined()) {
    if (first) {
      buf.copy_(d);
    } else {
      mul_(buf, mom);
      add_(buf, d, 1 - damp);
    }
    d = options_.nesterov() ? add_scaled(d, buf, mom) : buf;
  }
  add_(p, d, -lr);
}

}  // namespace zt::optim
