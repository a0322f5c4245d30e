// The fp16 loss scaler, step for step DeepSpeed's dynamic loss scaling (its
// DynamicLossScaler). fp16 gradients of a small loss underflow, so backward runs on
// loss * scale and the step divides the gradients by the scale again. A non-finite
// gradient norm means the scale overflowed: the step is skipped. The first
// `hysteresis` - 1 overflows only use up the hysteresis; after that every overflow
// halves the scale (never below min_loss_scale, nor 2^-126), until it grows again: after
// `loss_scale_window` + 1 good steps in a row it doubles, and the hysteresis is restored
// (with `consecutive_hysteresis`, every good step restores it). An overflow that would
// halve the scale at min_loss_scale is an error, as in DeepSpeed. A fixed `loss_scale`
// never changes. Without fp16 the scale is 1 and nothing happens.
#pragma once

#include <cstdint>

#include "zero/config.h"

namespace zt::zero {

class LossScaler {
 public:
  explicit LossScaler(const MixedPrecision& precision);

  /// The factor the loss is multiplied by before backward.
  double scale() const { return scale_; }
  /// True under fp16: gradients carry the scale, so the step unscales and checks them.
  bool active() const { return p_.fp16; }
  /// True under fp16 without a fixed `loss_scale`: the scale moves with overflows.
  bool dynamic() const { return p_.fp16 && p_.loss_scale <= 0; }
  /// After a step whose gradient norm was finite.
  void on_good_step();
  /// After a step whose gradients overflowed (the caller skips the update).
  void on_overflow();
  /// Overflows that would be taken without halving the scale, from now on.
  int overflows_tolerated() const { return hysteresis_ - 1; }

  /// Everything that decides the next scales, for checkpoints.
  struct State {
    double scale = 1.0;
    int hysteresis = 0;
    int64_t iteration = 0, last_overflow = -1;
  };
  State state() const { return {scale_, hysteresis_, iteration_, last_overflow_}; }
  void restore(const State& s);

 private:
  MixedPrecision p_;
  double scale_ = 1.0;
  int hysteresis_ = 0;
  int64_t iteration_ = 0;       // steps seen (good and overflowed)
  int64_t last_overflow_ = -1;  // the iteration of the last overflow
};

}  // namespace zt::zero
