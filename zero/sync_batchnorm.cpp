// The all-reduce BatchNorm statistics reducer.
#include "zero/sync_batchnorm.h"

#include "core/ops.h"
#include "nn/norm.h"

namespace zt::zero {

std::vector<std::shared_ptr<nn::BatchNorm>> enable_sync_batchnorm(nn::Module& m,
                                                                  comm::Communicator& comm) {
  std::vector<std::shared_ptr<nn::BatchNorm>> changed;
  for (auto& [path, mod] : m.named_modules()) {
    auto bn = std::dynamic_pointer_cast<nn::BatchNorm>(mod);
    if (!bn) continue;
    comm::Communicator* c = &comm;
    bn->stats_reducer = [c](const nn::BatchNormStats& local) {
      // One rank: its statistics are the global ones (no collective, nothing read back).
      if (c->size() == 1) return local;
      nn::BatchNormStats global;
      // The element counts are the hosts' own: gathered as host values (through NCCL's MPI
      // bootstrap on GPUs) and added in rank order, the same sum on every rank. An
      // all-reduce on the device would have to be read back, a host wait for every kernel
      // queued so far at each BatchNorm of each forward.
      for (const double n : c->all_gather_object<double>(local.count)) global.count += n;
      auto reduced = autograd::apply_function(
          "sync_batchnorm_stats", {local.sum, local.sum_sq},
          [c](const std::vector<Tensor>& in) {
            // One collective for both statistics.
            int64_t C = in[0].numel();
            Tensor both = cat({in[0].reshape({-1}), in[1].reshape({-1})}, 0).contiguous();
            c->all_reduce(both, comm::ReduceOp::kSum);
            return std::vector<Tensor>{both.narrow(0, 0, C).clone(), both.narrow(0, C, C).clone()};
          },
          [c](const std::vector<Tensor>& g) {
            int64_t C = g[0].defined() ? g[0].numel() : g[1].numel();
            Tensor g0 = g[0].defined() ? g[0] : zeros({C}, g[1].dtype(), g[1].device());
            Tensor g1 = g[1].defined() ? g[1] : zeros({C}, g[0].dtype(), g[0].device());
            Tensor both = cat({g0.reshape({-1}), g1.reshape({-1})}, 0).contiguous();
            c->all_reduce(both, comm::ReduceOp::kSum);
            return std::vector<Tensor>{both.narrow(0, 0, C).clone(), both.narrow(0, C, C).clone()};
          });
      global.sum = reduced[0];
      global.sum_sq = reduced[1];
      return global;
    };
    changed.push_back(bn);
  }
  return changed;
}

}  // namespace zt::zero
