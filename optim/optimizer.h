// Optimizer: the base of SGD and Adam/AdamW. It owns a list of named fp32 tensors —
// whole parameters, or the flat master shards the ZeRO engine hands it after setting
// their .grad() — and per-tensor state (moments, step), which it can save and load
// by name ("<param>.exp_avg", ...). It knows nothing of modules or ranks.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/ops.h"

namespace zt::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  /// `params`: unique names, floating tensors updated in place; `slots`: the state names
  /// this optimizer keeps per parameter (e.g. {"exp_avg", "exp_avg_sq"}).
  Optimizer(NamedTensors params, double lr, std::vector<std::string> slots);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter whose grad is defined (others are skipped).
  void step();
  /// Sets every parameter's grad to undefined.
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr);
  /// Number of step() calls so far.
  int64_t step_count() const { return step_count_; }
  const NamedTensors& params() const { return params_; }

  /// "step" (i64 scalar, step_count) and, for every parameter with state,
  /// "<param>.step" (i64 scalar) and "<param>.<slot>" (param-shaped). Tensors are the
  /// optimizer's own; clone them to snapshot.
  NamedTensors state_dict() const;
  /// Restores a state_dict() (values copied). Unknown keys and shape mismatches are
  /// reported together, by name, in one error.
  void load_state_dict(const NamedTensors& state);

 protected:
  /// Per-parameter state: slot tensors (created on first use) and the number of updates.
  struct ParamState {
    std::map<std::string, Tensor> slots;
    int64_t step = 0;
  };
  /// Updates `param` in place from `grad` (same shape, device; already counted in
  /// state.step). Called under NoGradGuard.
  virtual void update(const Tensor& param, const Tensor& grad, ParamState& state) = 0;
  /// The slot tensor, created as zeros like `param` if absent (`created` tells which).
  static Tensor& slot(ParamState& state, const std::string& name, const Tensor& param,
                      bool* created = nullptr);
  /// True when the fused CPU loop applies: CPU, contiguous, same floating dtype f32/f64.
  static bool cpu_fast_path(const Tensor& param, const std::vector<Tensor>& others);

 private:
  NamedTensors params_;
  std::vector<ParamState> state_;
  std::vector<std::string> slot_names_;
  double lr_;
  int64_t step_count_ = 0;
};

}  // namespace zt::optim
