// SGD update: the fused sgd_update (core/ops/optim.h) for contiguous f32/f64 tensors on the CPU or
// a GPU (one call per group of parameters that share a device, dtype, copy dtype,
// first-step flag and settings), core's in-place ops for everything else. Both compute one formula.
#include "optim/sgd.h"

#include <map>
#include <tuple>

namespace zt::optim {

SGD::SGD(NamedTensors params, const SGDOptions& o)
    : Optimizer(std::move(params), o.lr(), o.weight_decay(), {"momentum_buffer"}), options_(o) {
  ZT_CHECK(o.momentum() >= 0, "SGD: momentum must be >= 0, got ", o.momentum());
  ZT_CHECK(o.weight_decay() >= 0, "SGD: weight_decay must be >= 0, got ", o.weight_decay());
  ZT_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0),
           "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", o.momentum(),
           " and dampening ", o.dampening());
}

void SGD::update_many(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<ParamState*>& states, const std::vector<Tensor>& copies) {
  const bool with_buf = options_.momentum() != 0;
  struct Group {
    std::vector<Tensor> p, g, buf, copy;
  };
  // (device type, device index, dtype, copy dtype or -1, first step, lr scale, weight
  // decay) -> parameters.
  std::map<std::tuple<int, int, int, int, bool, double, double>, Group> groups;
  std::vector<size_t> late_copies;  // copies the kernels cannot write: after the update
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    bool first = false;
    Tensor buf = with_buf ? slot(*states[i], "momentum_buffer", p, &first) : Tensor();
    std::vector<Tensor> others{grads[i]};
    if (buf.defined()) others.push_back(buf);
    if (!fused_path(p, others)) {
      check_capturable_path(p);
      updating();
      update_generic(p, grads[i], buf, first, states[i]->settings);
      write_copy(copies[i], p);
      continue;
    }
    const bool in_pass = fused_copy(copies[i], p);
    if (copies[i].defined() && !in_pass) late_copies.push_back(i);
    const int copy_dtype = in_pass ? static_cast<int>(copies[i].dtype()) : -1;
    Group& gr =
        groups[{static_cast<int>(p.device().type), p.device().index, static_cast<int>(p.dtype()),
                copy_dtype, first, states[i]->settings.lr_scale, states[i]->settings.weight_decay}];
    gr.p.push_back(p);
    gr.g.push_back(grads[i]);
    if (buf.defined()) gr.buf.push_back(std::move(buf));
    if (in_pass) gr.copy.push_back(copies[i]);
  }
  const SGDOptions& o = options_;
  size_t index = 0;
  for (auto& [key, gr] : groups) {
    const bool first = std::get<4>(key);  // (never while capturing: slot() refuses)
    const double scale = std::get<5>(key), wd = std::get<6>(key);
    Tensor on_device = step_constants(index++, gr.p[0].device(), [this, first, scale] {
      return std::vector<double>{lr() * scale, first ? 1.0 : 0.0};
    });
    updating();
    sgd_update(gr.p, gr.g, gr.buf, gr.copy, lr() * scale, o.momentum(), o.dampening(), wd,
               o.nesterov(), first, on_device);
  }
  for (size_t i : late_copies) write_copy(copies[i], params[i]);
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
