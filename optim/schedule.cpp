// LR schedules.
#include "optim/schedule.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace zt::optim {

LrSchedule LrSchedule::constant(double lr) {
  ZT_CHECK(std::isfinite(lr) && lr >= 0, "LrSchedule::constant: lr must be finite and >= 0, got ",
           lr);
  LrSchedule s;
  s.base_ = lr;
  return s;
}

LrSchedule LrSchedule::warmup_cosine(double base, int64_t warmup, int64_t total, double min_lr) {
  ZT_CHECK(std::isfinite(base) && min_lr >= 0 && min_lr <= base,
           "LrSchedule::warmup_cosine: need 0 <= min_lr <= base, both finite, got base ", base,
           ", min_lr ", min_lr);
  ZT_CHECK(warmup >= 0 && total >= warmup, "LrSchedule::warmup_cosine: need 0 <= warmup (", warmup,
           ") <= total (", total, ")");
  LrSchedule s;
  s.kind_ = Kind::kWarmupCosine;
  s.base_ = base;
  s.warmup_ = warmup;
  s.total_ = total;
  s.min_lr_ = min_lr;
  return s;
}

LrSchedule LrSchedule::step(double base, int64_t step_size, double gamma) {
  ZT_CHECK(std::isfinite(base) && base >= 0 && step_size > 0 && std::isfinite(gamma) && gamma > 0,
           "LrSchedule::step: need a finite base >= 0, step_size > 0 and a finite gamma > 0; "
           "got ",
           base, ", ", step_size, ", ", gamma);
  LrSchedule s;
  s.kind_ = Kind::kStep;
  s.base_ = base;
  s.step_size_ = step_size;
  s.gamma_ = gamma;
  return s;
}

double LrSchedule::lr_at(int64_t step) const {
  ZT_CHECK(step >= 0, "LrSchedule::lr_at: step must be >= 0, got ", step);
  switch (kind_) {
    case Kind::kConstant:
      return base_;
    case Kind::kStep:
      return base_ * std::pow(gamma_, static_cast<double>(step / step_size_));
    case Kind::kWarmupCosine: {
      if (step < warmup_)
        return base_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
      if (step >= total_) return min_lr_;
      double progress = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
      return min_lr_ + (base_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
  }
  return base_;
}

}  // namespace zt::optim
