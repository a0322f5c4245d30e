// Fused optimizer updates over lists of tensors, for optim/: one pass over every element
// (one CUDA launch per list). The contracts are the kernel table's "optimizer" section
// (core/kernel_list.h): contiguous, distinct tensors of one dtype (f32 or f64) on one
// device, optional bf16/f16 copies written in the same pass. No autograd.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace zt {

/// Adam/AdamW over p[i] with gradients g[i] and state m[i] (exp_avg), v[i] (exp_avg_sq);
/// low: empty, or one copy (or undefined) per parameter. `constants`: undefined, or four
/// f64 values {l2, decay, step_size, inv_sqrt_bc2} on p's device read in their place
/// when the update runs (optimizers' capturable mode).
void adam_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                 const std::vector<Tensor>& m, const std::vector<Tensor>& v,
                 const std::vector<Tensor>& low, double beta1, double beta2, double l2,
                 double decay, double step_size, double inv_sqrt_bc2, double eps,
                 const Tensor& constants = Tensor());
/// SGD over p[i] with gradients g[i] and momentum buffers buf[i] (empty without momentum).
/// `constants`: undefined, or two f64 values {lr, first (0 or 1)} read in their place.
void sgd_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                const std::vector<Tensor>& buf, const std::vector<Tensor>& low, double lr,
                double momentum, double dampening, double weight_decay, bool nesterov, bool first,
                const Tensor& constants = Tensor());

}  // namespace zt
