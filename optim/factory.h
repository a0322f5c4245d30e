// The optimizer settings of a training run and the factory that builds one from them.
// The ZeRO engine runs it on fp32 master shards; single-process baselines use it as is.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace zt::optim {

/// Which optimizer, with its hyper-parameters (DeepSpeed's `optimizer` section).
struct OptimizerConfig {
  std::string type = "adamw";  // adamw | adam | sgd
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd
};

/// Builds the optimizer `cfg` names over `params` (name, tensor); an unknown type is an
/// error listing the known ones.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg,
                                          std::vector<std::pair<std::string, Tensor>> params);

}  // namespace zt::optim
