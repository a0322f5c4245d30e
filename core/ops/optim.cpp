// Fused optimizer updates (core/ops/optim.h): device dispatch into the kernel table.
#include "core/ops/optim.h"

#include "core/ops/dispatch.h"

namespace zt {
namespace {

// Counted after the kernel's checks passed (a refused update wrote nothing): every tensor the
// update writes, the moments too.
void count_update_writes(std::initializer_list<const std::vector<Tensor>*> lists) {
  for (const std::vector<Tensor>* l : lists) detail::count_writes(*l);
}

}  // namespace

void adam_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                 const std::vector<Tensor>& m, const std::vector<Tensor>& v,
                 const std::vector<Tensor>& low, double beta1, double beta2, double l2,
                 double decay, double step_size, double inv_sqrt_bc2, double eps,
                 const Tensor& constants) {
  if (p.empty()) return;
  ZT_DISPATCH(p[0].device(), adam_update, p, g, m, v, low, beta1, beta2, l2, decay, step_size,
              inv_sqrt_bc2, eps, constants);
  count_update_writes({&p, &m, &v, &low});
}

void sgd_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                const std::vector<Tensor>& buf, const std::vector<Tensor>& low, double lr,
                double momentum, double dampening, double weight_decay, bool nesterov, bool first,
                const Tensor& constants) {
  if (p.empty()) return;
  ZT_DISPATCH(p[0].device(), sgd_update, p, g, buf, low, lr, momentum, dampening, weight_decay,
              nesterov, first, constants);
  count_update_writes({&p, &buf, &low});
}

}  // namespace zt
