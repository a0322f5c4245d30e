// Parsing of the zero_optimization section.
#include "zero/config.h"

namespace zt::zero {

Config config_from_node(const config::Node& node) {
  Config c;
  config::Section s(node);
  s.get("stage", c.stage, 3, 3);
  s.get("stage3_prefetch_bucket_size", c.stage3_prefetch_bucket_size, 0);
  s.get("stage3_param_persistence_threshold", c.stage3_param_persistence_threshold, 0);
  s.get("stage3_max_live_parameters", c.stage3_max_live_parameters, 0);
  s.get("stage3_max_reuse_distance", c.stage3_max_reuse_distance, 0);
  s.get("reduce_bucket_size", c.reduce_bucket_size, 1);
  s.get("overlap_comm", c.overlap_comm);
  s.get("contiguous_gradients", c.contiguous_gradients);
  s.get("stage3_gather_16bit_weights_on_model_save", c.stage3_gather_16bit_weights_on_model_save);
  s.get("sync_batchnorm", c.sync_batchnorm);
  s.finish();
  return c;
}

MixedPrecision mixed_precision_from_nodes(const config::Node& bf16, const config::Node& fp16) {
  MixedPrecision m;
  config::Section b(bf16);
  b.get("enabled", m.bf16);
  b.finish();
  config::Section f(fp16);
  f.get("enabled", m.fp16);
  f.get("loss_scale", m.loss_scale, 0.0);
  f.get("initial_scale_power", m.initial_scale_power, 0, 62);
  f.get("loss_scale_window", m.loss_scale_window, 1);
  f.get("hysteresis", m.hysteresis, 1);
  f.get("min_loss_scale", m.min_loss_scale, 0.0);
  f.finish();
  if (m.bf16 && m.fp16) f.fail("enabled", "bf16 and fp16 cannot both be enabled");
  return m;
}

}  // namespace zt::zero
