// Reading zero_optimization, bf16, fp16 and buffers into zero::Config, and reconciling
// train.dtype with the mixed-precision sections.
#include "configs/zero_sections.h"

#include <utility>

namespace zt::config {

namespace {

const std::vector<std::pair<std::string, zero::BufferSync>> kSyncNames = {
    {"broadcast", zero::BufferSync::broadcast},
    {"average", zero::BufferSync::average},
    {"none", zero::BufferSync::none}};

// A key accepted for compatibility: zt always behaves as if it were `effective_value`, so
// any other value gets a located message saying it changes nothing.
void warn_if(Section& s, const std::string& key, bool value, bool effective_value,
             const std::string& why, std::vector<std::string>& warnings) {
  Node n = s.node() ? s.node().get(key) : Node();
  if (!n || value == effective_value) return;
  warnings.push_back(n.where() + ": " + n.path() + ": " + (value ? "true" : "false") +
                     " has no effect in zt (" + why + ")");
}

}  // namespace

void read_zero_optimization(Section s, zero::Config& out, std::vector<std::string>& warnings) {
  bool contiguous_gradients = true;
  bool gather_16bit_on_save = false;
  s.get("stage", out.stage, 3, 3)
      .get("stage3_prefetch_bucket_size", out.stage3_prefetch_bucket_size, 0)
      .get("stage3_param_persistence_threshold", out.stage3_param_persistence_threshold, 0)
      .get("stage3_max_live_parameters", out.stage3_max_live_parameters, 0)
      .get("stage3_max_reuse_distance", out.stage3_max_reuse_distance, 0)
      .get("reduce_bucket_size", out.reduce_bucket_size, 1)
      .get("overlap_comm", out.overlap_comm)
      .get("contiguous_gradients", contiguous_gradients)
      .get("stage3_gather_16bit_weights_on_model_save", gather_16bit_on_save)
      .get("sync_batchnorm", out.sync_batchnorm);
  s.finish();
  warn_if(s, "contiguous_gradients", contiguous_gradients, true,
          "gradients are always reduce-scattered from contiguous buckets", warnings);
  warn_if(s, "stage3_gather_16bit_weights_on_model_save", gather_16bit_on_save, false,
          "checkpoints hold the fp32 master shards, and `vqtok export` writes the gathered "
          "fp32 weights; no 16-bit consolidated file is written",
          warnings);
}

zero::MixedPrecision read_mixed_precision(Section bf16, Section fp16) {
  zero::MixedPrecision m;
  bf16.get("enabled", m.bf16);
  bf16.finish();
  fp16.get("enabled", m.fp16)
      .get("loss_scale", m.loss_scale, 0.0)
      .get("initial_scale_power", m.initial_scale_power, 0, 62)
      .get("loss_scale_window", m.loss_scale_window, 1)
      .get("hysteresis", m.hysteresis, 1)
      .get("min_loss_scale", m.min_loss_scale, 0.0);
  fp16.finish();
  if (m.bf16 && m.fp16)
    fp16.fail("enabled",
              "bf16 and fp16 cannot both be enabled; keep one (bf16 needs no loss scaling)");
  return m;
}

void read_buffers(Section s, zero::BuffersConfig& b) {
  s.get_enum("sync", b.sync, kSyncNames).get("verify_every", b.verify_every, 0);
  if (Node mods = s.raw("modules")) {
    if (!mods.is_sequence())
      mods.fail("expected a list of {module: path, sync: broadcast|average|none}");
    for (size_t i = 0; i < mods.size(); ++i) {
      Section m(mods.at(i));
      zero::BufferPolicy p;
      p.sync = b.sync;
      m.get("module", p.module).get_enum("sync", p.sync, kSyncNames);
      m.finish();
      if (!m.has("module")) m.fail("module", "each entry needs a module path");
      b.modules.push_back(p);
    }
  }
  s.finish();
}

void apply_dtype(const Node& dtype_node, zero::MixedPrecision& precision) {
  if (!dtype_node || dtype_node.is_null()) return;
  const std::string dtype = dtype_node.as_string();
  const std::string implied = precision_dtype_name(precision);
  if (dtype == implied) return;
  if (implied != "f32") {
    const std::string section = precision.bf16 ? "bf16" : "fp16";
    dtype_node.fail("train.dtype is " + dtype + " but " + section +
                    ".enabled is true; they must agree: set train.dtype: " + implied +
                    " or remove one of the two");
  }
  precision.bf16 = dtype == "bf16";
  precision.fp16 = dtype == "f16";
}

const char* precision_dtype_name(const zero::MixedPrecision& precision) {
  return precision.bf16 ? "bf16" : precision.fp16 ? "f16" : "f32";
}

}  // namespace zt::config
