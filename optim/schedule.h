// Learning-rate schedules as pure functions of the step index (0 = the first update):
// constant, linear warmup + cosine decay, and step decay.
#pragma once

#include <cstdint>

namespace zt::optim {

class LrSchedule {
 public:
  /// lr_at(s) = lr.
  static LrSchedule constant(double lr);
  /// Linear warmup then cosine decay to min_lr:
  ///   s < warmup:          base * (s + 1) / warmup
  ///   warmup <= s < total: min_lr + (base - min_lr) * (1 + cos(pi * (s - warmup) /
  ///                        (total - warmup))) / 2
  ///   s >= total:          min_lr
  static LrSchedule warmup_cosine(double base, int64_t warmup, int64_t total, double min_lr = 0.0);
  /// base * gamma^(s / step_size) (integer division), as torch's StepLR; base and gamma
  /// finite.
  static LrSchedule step(double base, int64_t step_size, double gamma = 0.1);

  /// The learning rate for update number `step` (0-based).
  double lr_at(int64_t step) const;

 private:
  enum class Kind { kConstant, kWarmupCosine, kStep };
  Kind kind_ = Kind::kConstant;
  double base_ = 0.0, min_lr_ = 0.0, gamma_ = 1.0;
  int64_t warmup_ = 0, total_ = 0, step_size_ = 1;
};

}  // namespace zt::optim
