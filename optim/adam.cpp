// Adam/AdamW update: the fused adam_update (core/ops/optim.h) for contiguous f32/f64 tensors on
// the CPU or a GPU (one pass, no temporaries; one call per group of parameters that
// share a device, dtype, copy dtype, step and settings), core's ops elsewhere. The arithmetic runs
// in the tensor's own type, in f32 for bf16/f16 ones.
#include "optim/adam.h"

#include <cmath>

namespace zt::optim {

Adam::Adam(NamedTensors params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), checked_lr(decoupled ? "AdamW" : "Adam", o.lr()),
                o.weight_decay(), {"exp_avg", "exp_avg_sq"}),
      options_(o),
      decoupled_(decoupled) {
  ZT_CHECK(o.beta1() >= 0 && o.beta1() < 1 && o.beta2() >= 0 && o.beta2() < 1, kind(),
           ": betas must be in [0, 1), got (", o.beta1(), ", ", o.beta2(), ")");
  ZT_CHECK(std::isfinite(o.eps()) && o.eps() > 0, kind(), ": eps must be finite and > 0, got ",
           o.eps(), " (it keeps m / (sqrt(v) + eps) finite where gradients are 0)");
  ZT_CHECK(std::isfinite(o.weight_decay()) && o.weight_decay() >= 0, kind(),
           ": weight_decay must be finite and >= 0, got ", o.weight_decay());
}

std::map<std::string, double> Adam::hyper_parameters() const {
  return {{"beta1", options_.beta1()},
          {"beta2", options_.beta2()},
          {"eps", options_.eps()},
          {"weight_decay", options_.weight_decay()}};
}

namespace {
// The constants of one Adam step: {step_size, inv_sqrt_bc2, decay, l2}.
struct StepConstants {
  double step_size, inv_sqrt_bc2, decay, l2;
};
// `lr`: the optimizer's; `s`: the parameters' own settings.
StepConstants adam_constants(double lr, const AdamOptions& o, bool decoupled, int64_t step,
                             const ParamSettings& s) {
  const double t = static_cast<double>(step), wd = s.weight_decay;
  lr *= s.lr_scale;
  return {lr / (1 - std::pow(o.beta1(), t)), 1.0 / std::sqrt(1 - std::pow(o.beta2(), t)),
          decoupled ? 1 - lr * wd : 1.0, decoupled ? 0.0 : wd};
}
}  // namespace

void Adam::update_many(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<ParamState*>& states, const std::vector<Tensor>& copies) {
  const AdamOptions& o = options_;
  update_fused(
      params, grads, states, copies,
      [&](size_t i) {
        return FusedEntry{
            {slot(*states[i], "exp_avg", params[i]), slot(*states[i], "exp_avg_sq", params[i])},
            states[i]->step};
      },
      [&](size_t i, const FusedEntry&) { update(params[i], grads[i], *states[i]); },
      [this](const FusedGroup& gr) {
        const ParamState* st = gr.state;
        return [this, st] {
          const StepConstants c =
              adam_constants(lr(), options_, decoupled_, st->step, st->settings);
          return std::vector<double>{c.l2, c.decay, c.step_size, c.inv_sqrt_bc2};
        };
      },
      [&](const FusedGroup& gr, const Tensor& on_device) {
        const StepConstants k =
            adam_constants(lr(), o, decoupled_, gr.state->step, gr.state->settings);
        adam_update(gr.p, gr.g, gr.slots[0], gr.slots[1], gr.copy, o.beta1(), o.beta2(), k.l2,
                    k.decay, k.step_size, k.inv_sqrt_bc2, o.eps(), on_device);
      });
}

void Adam::update(const Tensor& p, const Tensor& g, ParamState& st) {
  const double b1 = options_.beta1(), b2 = options_.beta2(), eps = options_.eps();
  const StepConstants k = adam_constants(lr(), options_, decoupled_, st.step, st.settings);
  const double step_size = k.step_size, inv_sqrt_bc2 = k.inv_sqrt_bc2, decay = k.decay, l2 = k.l2;
  Tensor m = slot(st, "exp_avg", p);
  Tensor v = slot(st, "exp_avg_sq", p);
  if (fused_path(p, {g, m, v})) {
    update_many({p}, {g}, {&st}, {Tensor()});
    return;
  }
  // 16-bit parameters are updated in f32, each result rounded once, as PyTorch's kernels
  // compute reduced-precision floats: in f16 the square of a gradient past 256 is inf, and
  // a second moment of inf would stop the parameter for good.
  const bool low = is_16bit_float(p.dtype());
  auto wide = [low](const Tensor& t) { return low ? t.to(DType::f32) : t; };
  Tensor pw = wide(p), mw = wide(m), vw = wide(v), gw = wide(g);
  Tensor gi = l2 != 0 ? add_scaled(gw, pw, l2) : gw;
  if (decay != 1.0) mul_(pw, decay);
  mul_(mw, b1);
  add_(mw, gi, 1 - b1);
  mul_(vw, b2);
  add_(vw, mul(gi, gi), 1 - b2);
  Tensor denom = add(mul(sqrt(vw), inv_sqrt_bc2), eps);
  add_(pw, div(mw, denom), -step_size);
  if (!low) return;
  p.copy_(pw);
  m.copy_(mw);
  v.copy_(vw);
}

}  // namespace zt::optim
