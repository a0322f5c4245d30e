// Global-norm gradient clipping. Each gradient's sum of squares is core's sum_squares:
// one pass in double with no temporary of the gradient's size, read on the host for CPU
// tensors and kept on the device (one f64 element) for the others.
#include "optim/clip.h"

#include <cmath>

#include "core/ops.h"

namespace zt::optim {

namespace {

// Sum of squares of a CPU tensor in double (core's sum_squares: one pass, no copy of a
// contiguous gradient), read straight from the one-element result.
double cpu_sum_sq(const Tensor& g) {
  return sum_squares(g).data<double>()[0];
}

// max_norm > 0 (NaN refused too), or an error saying what to do instead.
void check_max_norm(double max_norm) {
  ZT_CHECK(max_norm > 0, "clip: max_norm must be > 0, got ", max_norm,
           "; to leave the gradients as they are, do not clip (a zero::Config takes "
           "gradient_clipping 0 as off)");
}

}  // namespace

double grad_norm_sq(const std::vector<Tensor>& grads) {
  autograd::NoGradGuard ng;
  double total = 0.0;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    total += g.device().is_cpu() ? cpu_sum_sq(g) : sum_squares(g).item();
  }
  return total;
}

Tensor grad_norm_sq_on(const std::vector<Tensor>& grads, Device device) {
  autograd::NoGradGuard ng;
  double host = 0.0;
  Tensor on_device;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    if (g.device().is_cpu()) {
      host += cpu_sum_sq(g);
      continue;
    }
    ZT_CHECK(g.device() == device, "grad_norm_sq_on: a gradient on ", g.device().str(),
             ", the norm on ", device.str());
    Tensor s = sum_squares(g);
    on_device = on_device.defined() ? add(on_device, s) : s;
  }
  if (!on_device.defined()) return full({1}, host, DType::f64, device);
  return host != 0.0 ? add(on_device, host) : on_device;
}

void scale_grads(const std::vector<Tensor>& grads, double scale) {
  for (const Tensor& g : grads)
    if (g.defined()) mul_(g, scale);
}

void scale_grads(const std::vector<Tensor>& grads, const Tensor& scale) {
  ZT_CHECK(scale.numel() == 1, "scale_grads: the scale must have one element, got ",
           shape_str(scale.sizes()));
  if (scale.device().is_cpu() && scale.to(DType::f64).contiguous().data<double>()[0] == 1.0) return;
  Tensor cast;  // the scale in the dtype of the gradient before (usually all one dtype)
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    if (!cast.defined() || cast.dtype() != g.dtype()) cast = scale.to(g.dtype()).reshape({});
    mul_(g, cast);
  }
}

double clip_coefficient(double total_norm, double max_norm) {
  check_max_norm(max_norm);
  double c = max_norm / (total_norm + 1e-6);
  return c < 1.0 ? c : 1.0;
}

Tensor clip_coefficient(const Tensor& total_norm, double max_norm) {
  check_max_norm(max_norm);
  ZT_CHECK(total_norm.numel() == 1 && total_norm.dtype() == DType::f64,
           "clip_coefficient: expected a one-element f64 norm, got ",
           dtype_name(total_norm.dtype()), " ", shape_str(total_norm.sizes()));
  autograd::NoGradGuard ng;
  const Device d = total_norm.device();
  Tensor c = div(full({1}, max_norm, DType::f64, d), add(total_norm.reshape({1}), 1e-6));
  return where(lt(c, 1.0), c, full({1}, 1.0, DType::f64, d));
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.defined()) grads.push_back(p.grad());
  double norm = std::sqrt(grad_norm_sq(grads));
  double c = clip_coefficient(norm, max_norm);
  if (c < 1.0) scale_grads(grads, c);
  return norm;
}

}  // namespace zt::optim
