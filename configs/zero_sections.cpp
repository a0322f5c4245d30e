// Reading zero_optimization, bf16, fp16 and buffers into zero::Config, reconciling
// train.dtype with the mixed-precision sections, and a DeepSpeed config's sections in
// place of the YAML's.
#include "configs/zero_sections.h"

#include <functional>
#include <utility>

#include "configs/app_config.h"

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

// A DeepSpeed key zt does not implement: accepted when it asks for nothing (the value
// that turns it off), an error naming the key otherwise.
void refuse_unless_off(Section& s, const std::string& key,
                       const std::function<bool(const Node&)>& is_off, const std::string& what) {
  Node n = s.take(key);
  if (n && !is_off(n)) n.fail("not supported by zt (" + what + "); remove the key or turn it off");
}

bool is_false(const Node& n) {
  return !n.as_bool();
}

// DeepSpeed's zero_optimization keys that zt does not implement.
void reject_unsupported(Section& s) {
  auto off = [&](const std::string& key, const std::function<bool(const Node&)>& is_off,
                 const std::string& what) { refuse_unless_off(s, key, is_off, what); };
  auto no_offload = [](const Node& n) {
    Section o(n);
    std::string device = "none";
    o.get("device", device);
    // DeepSpeed's other offload_param keys only matter with a device; a key it does not
    // have is a typo (an error naming the nearest one).
    for (const char* key : {"nvme_path", "pin_memory", "buffer_count", "buffer_size", "max_in_cpu"})
      o.take_or_null(key);
    o.finish();
    return device == "none";
  };
  const std::string zpp = "ZeRO++ quantized or hierarchical communication";
  off("offload_param", no_offload, "parameters stay on the training device");
  off("zero_quantized_weights", is_false, zpp);
  off("zero_quantized_nontrainable_weights", is_false, zpp);
  off("zero_quantized_gradients", is_false, zpp);
  off(
      "zero_hpz_partition_size", [](const Node& n) { return n.as_int() == 1; }, zpp);
  off(
      "mics_shard_size", [](const Node& n) { return n.as_int() <= 0; }, "MiCS sharding");
  off("mics_hierarchical_params_gather", is_false, "MiCS sharding");
}

// offload_optimizer: {device: none|cpu, pin_memory}. DeepSpeed's NVMe keys are accepted
// with a note (they only matter for device: nvme, which zt does not implement).
void read_offload_optimizer(Section o, zero::OffloadOptimizer& out,
                            std::vector<std::string>& warnings) {
  std::string device = "none";
  o.get("device", device).get("pin_memory", out.pin_memory);
  for (const char* key :
       {"nvme_path", "buffer_count", "pipeline_read", "pipeline_write", "fast_init"})
    if (Node n = o.take(key))
      warnings.push_back(n.where() + ": " + n.path() +
                         ": has no effect in zt (an NVMe setting; zt offloads to host memory)");
  double ratio = 1.0;
  o.get("ratio", ratio, 0.0, 1.0);
  o.finish();
  if (device == "nvme")
    o.fail("device",
           "device: nvme is not supported by zt (optimizer state offloads to host memory "
           "only); use device: cpu, or none to keep it on the training device");
  if (device != "none" && device != "cpu")
    o.fail("device", "unknown offload device '" + device + "'; use cpu or none");
  if (ratio != 1.0 && device == "cpu")
    o.fail("ratio", "partial offload is not supported by zt; remove ratio or set it to 1.0");
  // DeepSpeed's default device is none: pin_memory alone turns no offload on.
  for (const auto& [key, set] : {std::pair{"pin_memory", out.pin_memory}, {"ratio", ratio != 1.0}})
    if (Node n = o.node() ? o.node().get(key) : Node(); n && set && device == "none")
      warnings.push_back(n.where() + ": " + n.path() +
                         ": has no effect with offload_optimizer.device none (nothing is "
                         "offloaded); set device: cpu to offload the optimizer state");
  out.device = device == "cpu" ? zero::OffloadDevice::kCpu : zero::OffloadDevice::kNone;
}

}  // namespace

void read_zero_optimization(Section s, zero::Config& out, std::vector<std::string>& warnings) {
  reject_unsupported(s);
  read_offload_optimizer(s.sub("offload_optimizer"), out.offload_optimizer, warnings);
  bool contiguous_gradients = true;
  bool gather_16bit_on_save = false;
  bool gather_fp16_on_save = false;  // DeepSpeed's older name of the same key
  bool reduce_scatter = true;
  double sub_group_size = 0, allgather_bucket_size = 0;
  bool allgather_partitions = true, round_robin_gradients = false, ignore_unused = true;
  if (const Node n = s.take("stage")) {
    const int64_t stage = n.as_int();
    if (stage < 0 || stage > 3)
      n.fail(std::to_string(stage) +
             " is no ZeRO stage (DeepSpeed's are 0 to 3); zt implements stage 3: set stage: 3");
    if (stage != 3)
      n.fail("stage " + std::to_string(stage) +
             " is not implemented: zt implements ZeRO stage 3 only, which partitions the "
             "parameters, gradients and optimizer states across the ranks; stages 0 (nothing "
             "partitioned), 1 (optimizer states partitioned) and 2 (gradients too) keep every "
             "parameter whole on every rank, which needs a data-parallel engine zt does not "
             "have: set stage: 3 (the same training, with less memory per rank) or remove the key");
  }
  s.get("stage3_prefetch_bucket_size", out.stage3_prefetch_bucket_size, 0)
      .get("stage3_param_persistence_threshold", out.stage3_param_persistence_threshold, 0)
      .get("stage3_max_live_parameters", out.stage3_max_live_parameters, 0)
      .get("stage3_max_reuse_distance", out.stage3_max_reuse_distance, 0)
      .get("reduce_bucket_size", out.reduce_bucket_size, 1)
      .get("overlap_comm", out.overlap_comm)
      .get("contiguous_gradients", contiguous_gradients)
      .get("stage3_gather_16bit_weights_on_model_save", gather_16bit_on_save)
      .get("stage3_gather_fp16_weights_on_model_save", gather_fp16_on_save)
      .get("reduce_scatter", reduce_scatter)
      .get("sub_group_size", sub_group_size, 0.0)
      .get("allgather_partitions", allgather_partitions)
      .get("allgather_bucket_size", allgather_bucket_size, 0.0)
      .get("round_robin_gradients", round_robin_gradients)
      .get("ignore_unused_parameters", ignore_unused)
      .get("sync_batchnorm", out.sync_batchnorm);
  s.finish();
  warn_if(s, "contiguous_gradients", contiguous_gradients, true,
          "gradients are always reduce-scattered from contiguous buckets", warnings);
  const std::string no_16bit_file =
      "checkpoints hold the fp32 master shards, and `vqtok export` writes the gathered fp32 "
      "weights; no 16-bit consolidated file is written";
  warn_if(s, "stage3_gather_16bit_weights_on_model_save", gather_16bit_on_save, false,
          no_16bit_file, warnings);
  warn_if(s, "stage3_gather_fp16_weights_on_model_save", gather_fp16_on_save, false, no_16bit_file,
          warnings);
  warn_if(s, "reduce_scatter", reduce_scatter, true,
          "stage 3 always reduce-scatters gradients into the shards", warnings);
  warn_if(s, "allgather_partitions", allgather_partitions, true,
          "a ZeRO-1/2 setting; stage 3 gathers parameters per module", warnings);
  warn_if(s, "round_robin_gradients", round_robin_gradients, false,
          "a ZeRO-1/2 setting for CPU offload", warnings);
  warn_if(s, "ignore_unused_parameters", ignore_unused, true,
          "unused parameters simply get no gradient", warnings);
  for (const char* key : {"sub_group_size", "allgather_bucket_size"})
    if (Node n = s.node() ? s.node().get(key) : Node())
      warnings.push_back(n.where() + ": " + n.path() + ": has no effect in zt (" +
                         (std::string(key) == "sub_group_size"
                              ? "the optimizer updates each rank's whole shard at once"
                              : "a ZeRO-1/2 setting; stage 3 gathers with "
                                "stage3_prefetch_bucket_size") +
                         ")");
}

zero::MixedPrecision read_mixed_precision(Section bf16, Section fp16,
                                          std::vector<std::string>& warnings) {
  zero::MixedPrecision m;
  bf16.get("enabled", m.bf16);
  refuse_unless_off(bf16, "check_grad_overflow", is_false,
                    "bf16 needs no loss scale, and zt applies every bf16 update");
  if (Node n = bf16.take("immediate_grad_update"))
    warnings.push_back(n.where() + ": " + n.path() +
                       ": has no effect in zt (each backward's gradients go straight into "
                       "the fp32 gradient shards)");
  bf16.finish();
  refuse_unless_off(fp16, "auto_cast", is_false,
                    "the engine casts no inputs: in the apps each model part holding "
                    "partitioned parameters casts its own, embedding code casts its inputs");
  refuse_unless_off(fp16, "fp16_master_weights_and_grads", is_false,
                    "zt keeps fp32 master weights and fp32 gradient shards");
  fp16.get("enabled", m.fp16)
      .get("loss_scale", m.loss_scale, 0.0)
      .get("initial_scale_power", m.initial_scale_power, 0, 62)
      .get("loss_scale_window", m.loss_scale_window, 1)
      .get("hysteresis", m.hysteresis, 1)
      .get("consecutive_hysteresis", m.consecutive_hysteresis)
      .get("min_loss_scale", m.min_loss_scale, 0.0);
  fp16.finish();
  if (m.loss_scale > 0 && m.loss_scale < zero::kLowestLossScale)
    fp16.fail("loss_scale",
              "must be 0 (dynamic) or at least 2^-126: the step divides the fp32 gradients by "
              "it");
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
      for (const zero::BufferPolicy& earlier : b.modules)
        if (earlier.module == p.module)
          m.fail("module", "'" + p.module +
                               "' has a policy in an earlier entry already (the later one "
                               "would win without a word); keep one");
      b.modules.push_back(p);
    }
  }
  s.finish();
}

void apply_dtype(const Node& dtype_node, const Node& bf16, const Node& fp16,
                 zero::MixedPrecision& precision) {
  if (!dtype_node || dtype_node.is_null()) return;
  const std::string dtype = dtype_node.as_string();
  const std::string implied = precision_dtype_name(precision);
  if (dtype == implied) return;
  // A section turned off in so many words is a contradiction too.
  const Node& asked = dtype == "bf16" ? bf16 : fp16;
  const Node off = dtype != "f32" && asked && asked.is_map() ? asked.get("enabled") : Node();
  if (off && !off.as_bool())
    dtype_node.fail("train.dtype is " + dtype + " but " + off.path() + " is false (" + off.where() +
                    "); they must agree: set train.dtype: f32, or enable " +
                    (dtype == "bf16" ? "bf16" : "fp16"));
  if (implied != "f32") {
    const std::string section = precision.bf16 ? "bf16" : "fp16";
    const Node& on = precision.bf16 ? bf16 : fp16;
    const Node enabled = on && on.is_map() ? on.get("enabled") : Node();
    dtype_node.fail("train.dtype is " + dtype + " but " + section + ".enabled is true" +
                    (enabled ? " (" + enabled.where() + ")" : std::string()) +
                    "; they must agree: set train.dtype: " + implied + " or remove one of the two");
  }
  precision.bf16 = dtype == "bf16";
  precision.fp16 = dtype == "f16";
}

const char* precision_dtype_name(const zero::MixedPrecision& precision) {
  return precision.bf16 ? "bf16" : precision.fp16 ? "f16" : "f32";
}

void read_engine_sections(Section& s, const Node& ds, AppConfig& c) {
  const Node yaml = s.node();
  // The YAML section's keys that `d`, the DeepSpeed section replacing it, leaves out: they
  // go back to their defaults (zt's own keys, such as sync_batchnorm, too), which the
  // warning names.
  auto left_out = [](const Node& y, const Node& d) {
    std::string keys;
    if (y.is_map())
      for (const std::string& k : y.keys())
        if (!d || !d.is_map() || !d.has(k)) keys += (keys.empty() ? "" : ", ") + k;
    return keys.empty() ? std::string()
                        : "; its keys the DeepSpeed config does not set go back to their "
                          "defaults: " +
                              keys;
  };
  auto replaced = [&](const char* key) {
    if (Node y = s.take(key))
      c.warnings.push_back(y.where() + ": " + y.path() +
                           ": replaced by the DeepSpeed config's section (" + ds.get(key).where() +
                           ")" + left_out(y, ds.get(key)));
  };
  if (ds && ds.has("zero_optimization")) {
    replaced("zero_optimization");
    read_zero_optimization(Section(ds.get("zero_optimization")), c.zero, c.warnings);
  } else {
    read_zero_optimization(s.sub("zero_optimization"), c.zero, c.warnings);
  }
  const Node train = yaml.get("train");
  const Node dtype = train ? train.get("dtype") : Node();
  const bool ds_precision = ds && (ds.has("bf16") || ds.has("fp16"));
  if (ds_precision) {
    // The DeepSpeed config's precision replaces the YAML's whole: both sections, also the
    // one it leaves out.
    const char* given = ds.has("bf16") ? "bf16" : "fp16";
    for (const char* key : {"bf16", "fp16"})
      if (Node y = s.take(key))
        c.warnings.push_back(y.where() + ": " + y.path() +
                             ": replaced by the DeepSpeed config's precision (" +
                             ds.get(ds.has(key) ? key : given).where() + ")" +
                             left_out(y, ds.has(key) ? ds.get(key) : Node()));
    c.zero.precision =
        read_mixed_precision(Section(ds.get("bf16")), Section(ds.get("fp16")), c.warnings);
    const std::string implied = precision_dtype_name(c.zero.precision);
    if (dtype && dtype.as_string() != implied)
      c.warnings.push_back(dtype.where() + ": train.dtype: " + dtype.as_string() +
                           " is replaced by the DeepSpeed config's " + implied);
  } else {
    const Node bf16 = yaml.get("bf16"), fp16 = yaml.get("fp16");
    c.zero.precision = read_mixed_precision(s.sub("bf16"), s.sub("fp16"), c.warnings);
    apply_dtype(dtype, bf16, fp16, c.zero.precision);
  }
  c.train.dtype = precision_dtype_name(c.zero.precision);
  // fp16's loss-scaling keys are read whether or not fp16 is on (as DeepSpeed reads them);
  // where it is off they do nothing, which the run says.
  const Node fp16 = (ds_precision ? ds : yaml).get("fp16");
  if (fp16 && fp16.is_map() && !c.zero.precision.fp16)
    for (const std::string& key : fp16.keys())
      if (const Node n = fp16.get(key); key != "enabled")
        c.warnings.push_back(n.where() + ": " + n.path() +
                             " has no effect: fp16 is not enabled (the run trains in " +
                             c.train.dtype + ")");
  // A fixed scale never moves: the dynamic scaler's keys do nothing beside it.
  if (fp16 && fp16.is_map() && c.zero.precision.fp16 && c.zero.precision.loss_scale > 0)
    for (const char* key : {"initial_scale_power", "loss_scale_window", "hysteresis",
                            "consecutive_hysteresis", "min_loss_scale"})
      if (const Node n = fp16.get(key))
        c.warnings.push_back(n.where() + ": " + n.path() +
                             " has no effect: fp16.loss_scale fixes the scale at " +
                             fp16.get("loss_scale").scalar() + " (0 makes it dynamic)");
  read_buffers(s.sub("buffers"), c.zero.buffers);
  c.zero.gradient_clipping = c.train.gradient_clipping;
  c.zero.gradient_accumulation_steps = static_cast<int>(c.train.gradient_accumulation_steps);
}

}  // namespace zt::config
