// Dynamic and fixed fp16 loss scaling, step for step as DeepSpeed's DynamicLossScaler.
#include "zero/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace zt::zero {

LossScaler::LossScaler(const MixedPrecision& precision) : p_(precision) {
  if (!p_.fp16) return;
  scale_ = p_.loss_scale > 0 ? p_.loss_scale : std::ldexp(1.0, p_.initial_scale_power);
  hysteresis_ = p_.hysteresis;
}

void LossScaler::on_good_step() {
  if (!dynamic()) return;
  if (p_.consecutive_hysteresis) hysteresis_ = p_.hysteresis;
  // Good steps since the last overflow, this one excluded: the scale doubles at the
  // (window + 1)-th, (2 window + 1)-th, ... good step in a row.
  const int64_t stable = iteration_ - last_overflow_ - 1;
  if (stable > 0 && stable % p_.loss_scale_window == 0) {
    hysteresis_ = p_.hysteresis;
    scale_ *= 2;
  }
  ++iteration_;
}

void LossScaler::on_overflow() {
  if (!dynamic()) return;
  // The first hysteresis - 1 overflows (since the scale last grew) only use it up; from
  // then on every overflow halves the scale.
  // A scale below the minimum (an initial scale under min_loss_scale) rises to it, as
  // DeepSpeed's does; at the minimum an overflow stops the run.
  if (p_.hysteresis == 1 || hysteresis_ == 1) {
    // Nor below 2^-126, whatever min_loss_scale says: the step divides the fp32 gradients
    // by the scale, and a smaller one's reciprocal is no finite float.
    const double floor = std::max(p_.min_loss_scale, kLowestLossScale);
    ZT_CHECK(scale_ != floor, "fp16: the gradients overflow with the loss scale at its minimum, ",
             floor == p_.min_loss_scale
                 ? detail::cat("min_loss_scale ", p_.min_loss_scale,
                               " (zero::Config::precision; DeepSpeed's fp16.min_loss_scale)")
                 : detail::cat("2^-126 (the smallest scale whose reciprocal is a finite float; "
                               "min_loss_scale is ",
                               p_.min_loss_scale, ")"),
             ": training stops here, as DeepSpeed's does. Lower the learning rate (gradients "
             "that grow from step to step come from a diverging run), or train in bf16, which "
             "needs no loss scale");
    scale_ = std::max(scale_ / 2, floor);
  } else {
    --hysteresis_;
  }
  last_overflow_ = iteration_;
  ++iteration_;
}

void LossScaler::restore(const State& s) {
  scale_ = s.scale;
  hysteresis_ = s.hysteresis;
  iteration_ = s.iteration;
  last_overflow_ = s.last_overflow;
}

}  // namespace zt::zero
