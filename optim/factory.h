// The optimizer settings of a training run and the factory that builds one from them.
// The ZeRO engine runs it on fp32 master shards; single-process baselines use it as is.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace zt::optim {

/// Parameters with hyper-parameters of their own (what PyTorch calls a param_group): those
/// whose dotted names match one of `params` ('*' matches any run of characters).
struct ParamGroup {
  std::vector<std::string> params = {};
  double lr_scale =
      1.0;  ///< learning rate: lr_scale x the optimizer's (which follows the schedule)
  std::optional<double> weight_decay = {};  ///< unset: as outside any group
};

/// Which optimizer, with its hyper-parameters (DeepSpeed's `optimizer` section).
struct OptimizerConfig {
  std::string type = "adamw";  // adamw | adam | sgd
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;   // sgd
  double dampening = 0.0;  // sgd
  bool nesterov = false;   // sgd
  /// Whether parameters of fewer than two dimensions (biases, norm scales) take the weight
  /// decay. GPT-2-style training turns it off; on by default, as in PyTorch.
  bool weight_decay_1d = true;
  /// Parameters whose dotted names match one of these take no weight decay either; '*'
  /// matches any run of characters ("*.bias", "gpt.wte.*"). A pattern that matches no
  /// parameter is an error.
  std::vector<std::string> no_weight_decay = {};
  /// Applied last: a group's settings win over the two above. A parameter in two groups,
  /// or a pattern that matches no parameter, is an error.
  std::vector<ParamGroup> param_groups = {};
};

/// Builds the optimizer `cfg` names over `params` (name, tensor), with weight decay left
/// out and parameter groups set where cfg says; an unknown type is an error listing the
/// known ones. `dims`: each parameter's number of dimensions when `params` are not the
/// parameters themselves (the ZeRO engine's flat shards); empty: each tensor's own.
/// `aliases`: each parameter's other names (a tied tensor registered in several modules),
/// which cfg's name patterns match too; empty: none.
std::unique_ptr<Optimizer> make_optimizer(
    const OptimizerConfig& cfg, NamedTensors params, std::vector<int64_t> dims = {},
    const std::vector<std::vector<std::string>>& aliases = {});

/// '*' matches any run of characters, everything else itself.
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace zt::optim
