// The fp16 loss scaler (DeepSpeed's dynamic loss scaling). fp16 gradients of a small
// loss underflow, so backward runs on loss * scale and the step divides the gradients by
// the scale again. A non-finite gradient norm means the scale overflowed: the step is
// skipped and, after `hysteresis` such steps, the scale halves (never below
// min_loss_scale); `loss_scale_window` good steps in a row double it. A fixed
// `loss_scale` never changes. Without fp16 the scale is 1 and nothing happens.
#pragma once

#include "zero/config.h"

namespace zt::zero {

class LossScaler {
 public:
  explicit LossScaler(const MixedPrecision& precision);

  /// The factor the loss is multiplied by before backward.
  double scale() const { return scale_; }
  /// True under fp16: gradients carry the scale, so the step unscales and checks them.
  bool active() const { return p_.fp16; }
  /// After a step whose gradient norm was finite.
  void on_good_step();
  /// After a step whose gradients overflowed (the caller skips the update).
  void on_overflow();

 private:
  MixedPrecision p_;
  double scale_ = 1.0;
  int good_steps_ = 0;
  int hysteresis_left_ = 0;
};

}  // namespace zt::zero
