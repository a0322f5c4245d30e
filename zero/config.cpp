// zero::check_config: the engine's own range checks, for configs built in code (the YAML
// and DeepSpeed loaders check the same ranges where they read the keys).
#include "zero/config.h"

#include <cmath>
#include <cstdint>
#include <utility>

#include "core/error.h"

namespace zt::zero {

void check_config(const Config& c) {
  const char* where = "zero::Config: ";
  ZT_CHECK(c.stage == 3, where, "zero::Engine implements stage 3 only, got stage ", c.stage);
  const std::pair<const char*, int64_t> sizes[] = {
      {"stage3_prefetch_bucket_size", c.stage3_prefetch_bucket_size},
      {"stage3_param_persistence_threshold", c.stage3_param_persistence_threshold},
      {"stage3_max_live_parameters", c.stage3_max_live_parameters},
      {"stage3_max_reuse_distance", c.stage3_max_reuse_distance},
      {"buffers.verify_every", c.buffers.verify_every}};
  for (const auto& [name, v] : sizes) ZT_CHECK(v >= 0, where, name, " is ", v, "; it must be >= 0");
  ZT_CHECK(c.reduce_bucket_size >= 1, where, "reduce_bucket_size is ", c.reduce_bucket_size,
           "; it must be >= 1 (elements per gradient bucket)");
  ZT_CHECK(c.gradient_accumulation_steps >= 1, where, "gradient_accumulation_steps is ",
           c.gradient_accumulation_steps, "; it must be >= 1 (1: an update after every backward)");
  ZT_CHECK(std::isfinite(c.gradient_clipping) && c.gradient_clipping >= 0, where,
           "gradient_clipping is ", c.gradient_clipping,
           "; it must be a finite value >= 0 (0: no clipping)");
  const MixedPrecision& p = c.precision;
  ZT_CHECK(!(p.bf16 && p.fp16), where,
           "precision.bf16 and precision.fp16 are both enabled; enable one of them");
  if (!p.fp16) return;
  ZT_CHECK(std::isfinite(p.loss_scale) && (p.loss_scale == 0 || p.loss_scale >= kLowestLossScale),
           where, "precision.loss_scale is ", p.loss_scale,
           "; it must be 0 (dynamic) or a finite scale of at least 2^-126 (the step divides "
           "the fp32 gradients by it)");
  ZT_CHECK(p.loss_scale > 0 || (p.initial_scale_power >= 0 && p.initial_scale_power <= 62), where,
           "precision.initial_scale_power is ", p.initial_scale_power,
           "; use 0 to 62, as the config loaders do (DeepSpeed's default: 16)");
  ZT_CHECK(p.loss_scale_window >= 1 && p.hysteresis >= 1, where, "precision.loss_scale_window (",
           p.loss_scale_window, ") and precision.hysteresis (", p.hysteresis, ") must be >= 1");
  ZT_CHECK(std::isfinite(p.min_loss_scale) && p.min_loss_scale >= 0, where,
           "precision.min_loss_scale is ", p.min_loss_scale, "; it must be a finite value >= 0");
}

}  // namespace zt::zero
