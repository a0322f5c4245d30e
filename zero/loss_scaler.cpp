// Dynamic and fixed fp16 loss scaling.
#include "zero/loss_scaler.h"

#include <algorithm>
#include <cmath>

namespace zt::zero {

LossScaler::LossScaler(const MixedPrecision& precision) : p_(precision) {
  if (!p_.fp16) return;
  scale_ = p_.loss_scale > 0 ? p_.loss_scale : std::ldexp(1.0, p_.initial_scale_power);
  hysteresis_left_ = p_.hysteresis;
}

void LossScaler::on_good_step() {
  if (!p_.fp16 || p_.loss_scale > 0) return;  // no scaling, or a fixed scale
  if (++good_steps_ >= p_.loss_scale_window) {
    scale_ *= 2;
    good_steps_ = 0;
  }
}

void LossScaler::on_overflow() {
  if (!p_.fp16 || p_.loss_scale > 0) return;
  good_steps_ = 0;
  if (--hysteresis_left_ <= 0) {
    scale_ = std::max(scale_ / 2, p_.min_loss_scale);
    hysteresis_left_ = p_.hysteresis;
  }
}

}  // namespace zt::zero
