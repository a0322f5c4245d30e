// The DeepSpeed JSON front end: each key DeepSpeed documents for training is mapped onto
// TrainConfig or zero::Config, accepted with a warning when it changes nothing in zt, or
// rejected with its key path when zt does not implement what it asks for.
#include "configs/deepspeed.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include "configs/hjson.h"
#include "configs/zero_sections.h"
#include "core/ascii.h"
#include "core/error.h"
#include "core/plural.h"

namespace zt::config {

namespace {

// Top-level DeepSpeed features zt does not have. Accepted only when turned off (`false`
// or `{enabled: false}`); otherwise an error saying what to use instead.
const std::vector<std::pair<std::string, std::string>> kUnsupported = {
    {"amp", "use the bf16 or fp16 section"},
    {"torch_autocast", "zt has no autocast: use the bf16 or fp16 section"},
    {"flops_profiler", "zt has no FLOPs profiler"},
    {"tensorboard", "set train.tensorboard: true in the YAML instead"},
    {"wandb", "zt writes metrics.jsonl and curves.svg in output_dir"},
    {"csv_monitor", "zt writes metrics.jsonl and curves.svg in output_dir"},
    {"comet", "zt writes metrics.jsonl and curves.svg in output_dir"},
    {"comms_logger", "zt-bench zero reports communication volumes"},
    {"aio", "zt does not offload to NVMe"},
    {"elasticity", "zt's world size is fixed at launch (checkpoints load at any world size)"},
    {"autotuning", "zt has no autotuner"},
    {"compression_training", "zt does not compress models"},
    {"data_efficiency", "zt's data loader has no curriculum"},
    {"curriculum_learning", "zt's data loader has no curriculum"},
    {"sparse_attention", "zt has no sparse attention"},
    {"pipeline", "zt has no pipeline parallelism"},
    {"hybrid_engine", "zt has no inference engine"},
    {"prescale_gradients", "zt averages gradients in the reduce-scatter"},
    {"gradient_predivide_factor", "zt averages gradients in the reduce-scatter"},
    {"communication_data_type",
     "zt reduces gradients in fp32 at every precision: set it to fp32 or leave it out"},
    {"data_types",
     "zt accumulates gradients in fp32: set grad_accum_dtype to fp32 or leave it out"},
    {"sparse_gradients", "zt's gradients are dense"},
    {"checkpoint", "zt's checkpoints are set by train.checkpoint_every and keep_checkpoints"},
};

// Keys that only change logging or safety checks in DeepSpeed: accepted, noted.
const std::vector<std::string> kNoEffect = {"wall_clock_breakdown", "memory_breakdown",
                                            "zero_allow_untested_optimizer", "dump_state",
                                            "zero_force_ds_cpu_optimizer"};

// DeepSpeed's name of the dtype the parameters train in.
const char* trained_dtype_name(const zero::MixedPrecision& precision) {
  return precision.bf16 ? "bf16" : precision.fp16 ? "fp16" : "fp32";
}

// Whether `n`, the value of the unsupported key `key`, asks for what zt does anyway: `false`
// or {enabled: false}; gradient_predivide_factor 1 (no pre-division); communication_data_type
// fp32 (the dtype of zt's gradient reduce-scatter at every precision) or the dtype the
// parameters train in (`precision`, already read from the bf16 / fp16 sections: DeepSpeed's
// default, which apply_deepspeed warns has no effect); data_types with grad_accum_dtype fp32
// or null (DeepSpeed's default; its one key), as zt accumulates gradients in fp32 shards.
bool turned_off(const std::string& key, const Node& n, const zero::MixedPrecision& precision) {
  if (key == "gradient_predivide_factor") return n.is_scalar() && n.as_double() == 1.0;
  if (key == "data_types" && n.is_map()) {
    for (const std::string& k : n.keys())
      if (k != "grad_accum_dtype") return false;
    const Node dtype = n.get("grad_accum_dtype");
    return !dtype || dtype.is_null() || (dtype.is_scalar() && dtype.as_string() == "fp32");
  }
  if (key == "communication_data_type")
    return n.is_scalar() &&
           (n.as_string() == "fp32" || n.as_string() == trained_dtype_name(precision));
  if (n.is_scalar()) return !n.as_bool();
  if (n.is_map()) return n.has("enabled") && !n.get("enabled").as_bool();
  return false;
}

template <typename T>
std::string text(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, std::array<double, 2>>) {
    os << "[" << v[0] << ", " << v[1] << "]";
  } else if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, Optimizer>) {
    os << optimizer_name(v);
  } else if constexpr (std::is_same_v<T, Schedule>) {
    os << schedule_name(v);
  } else {
    os << v;
  }
  return os.str();
}

// Sets a train field from the DeepSpeed node `ds_node`; a different value the YAML gave
// for train.`key` is replaced, and a warning says so with both locations (the replaced
// value's: the YAML's, or the DeepSpeed key that set it since).
struct TakeOver {
  const Node& yaml_train;
  std::vector<std::string>& warnings;
  std::map<std::string, Node> taken = {};  // train key -> the DeepSpeed node that last set it

  template <typename T>
  void operator()(const std::string& key, T& field, const T& value, const Node& ds_node) {
    const Node y = yaml_train && yaml_train.is_map() ? yaml_train.get(key) : Node();
    if (y && !(field == value)) {
      // A value the scheduler's or optimizer's type implies is named by the type.
      const std::string& path = ds_node.path();
      const bool implied = path == "type" || (path.size() > 5 && path.ends_with(".type"));
      // A number computed from the key's (cos_min_ratio x lr) is named as computed.
      bool derived = false;
      if constexpr (std::is_same_v<T, double>)
        derived = ds_node.is_scalar() && std::strtod(ds_node.scalar().c_str(), nullptr) != value;
      const std::string by =
          implied || derived
              ? path + " " + ds_node.scalar() + " sets train." + key + " to " + text(value) +
                    ", replacing " + text(field)
              : path + " (" + text(value) + ") replaces train." + key + " (" + text(field) + ")";
      const auto earlier = taken.find(key);
      warnings.push_back(ds_node.where() + ": " + by + " from " +
                         (earlier != taken.end() ? earlier->second : y).where());
    }
    taken[key] = ds_node;
    field = value;
  }
};

void read_optimizer(Section o, TrainConfig& t, TakeOver& take) {
  std::string type;
  o.get("type", type);
  if (!o.has("type")) o.fail("type", "the optimizer needs a type: Adam, AdamW or SGD");
  const Node type_node = o.node().get("type");
  Section p = o.sub("params");
  const std::string kind = ascii_lower(type);
  if (kind != "adam" && kind != "adamw" && kind != "sgd")
    type_node.fail("optimizer '" + type +
                   "' is not supported by zt: use Adam, AdamW or SGD (Lamb, OneBitAdam, "
                   "ZeroOneAdam, Adagrad and the CPU/offload optimizers are not implemented)");
  // Left out, the type's own settings take DeepSpeed's defaults, as DeepSpeed builds the
  // optimizer with them (Adam's betas and eps; SGD's momentum, dampening, nesterov), and a
  // warning says what they replace where the YAML gives others; lr and weight_decay keep
  // the YAML's train values.
  double lr = t.lr, eps = 1e-8, weight_decay = t.weight_decay, momentum = 0.0, dampening = 0;
  std::vector<double> betas = {0.9, 0.999};
  bool adam_w_mode = true, torch_adam = false, nesterov = false;
  p.get("lr", lr, 0.0, 10.0).get("weight_decay", weight_decay, 0.0, 10.0);
  Optimizer which = Optimizer::sgd;
  if (kind == "sgd") {
    p.get("momentum", momentum, 0.0, 1.0)
        .get("nesterov", nesterov)
        .get("dampening", dampening, 0.0, 1.0);
    if (const std::string why = nesterov_problem(momentum, dampening); nesterov && !why.empty())
      p.fail("nesterov", why);
  } else {
    p.get("betas", betas).get("eps", eps, 0.0, 1.0);
    if (eps == 0.0)  // as in read_train: 0 / 0 where a gradient has been 0
      p.fail("eps", "eps must be > 0 with Adam and AdamW; the usual value is 1e-8");
    if (betas.size() != 2 || !(betas[0] >= 0 && betas[0] < 1 && betas[1] >= 0 && betas[1] < 1))
      p.fail("betas", "expected two values in [0, 1), e.g. [0.9, 0.999]");
    // DeepSpeed's "Adam" decouples weight decay (AdamW) unless adam_w_mode is false.
    p.get("adam_w_mode", adam_w_mode).get("torch_adam", torch_adam);
    which = kind == "adam" && !adam_w_mode ? Optimizer::adam : Optimizer::adamw;
    // torch_adam: DeepSpeed builds torch.optim.AdamW, whose weight_decay defaults to 0.01.
    if (torch_adam && which == Optimizer::adamw && !p.has("weight_decay")) weight_decay = 0.01;
  }
  p.finish();
  o.finish();
  auto at = [&](const std::string& key) {
    Node n = p.node() ? p.node().get(key) : Node();
    return n ? n : type_node;
  };
  take("optimizer", t.optimizer, which, type_node);
  take("lr", t.lr, lr, at("lr"));
  take("weight_decay", t.weight_decay, weight_decay, at("weight_decay"));
  if (kind == "sgd") {
    take("momentum", t.momentum, momentum, at("momentum"));
    take("dampening", t.dampening, dampening, at("dampening"));
    take("nesterov", t.nesterov, nesterov, at("nesterov"));
  } else {
    take("betas", t.betas, std::array<double, 2>{betas[0], betas[1]}, at("betas"));
    take("eps", t.eps, eps, at("eps"));
  }
}

// A scheduler key left out takes DeepSpeed's default, as DeepSpeed would; unless the YAML
// sets the same setting (then take() names both), a warning says which default applies.
void note_default(const TakeOver& take, const Section& p, const char* key, const char* yaml_key,
                  const std::string& what, std::vector<std::string>& warnings,
                  const Node& type_node) {
  if (p.node() && p.node().has(key)) return;
  if (take.yaml_train && take.yaml_train.is_map() && take.yaml_train.has(yaml_key)) return;
  warnings.push_back(type_node.where() + ": " + type_node.path() + " " + type_node.scalar() +
                     " without params." + key + ": " + what);
}

// DeepSpeed warms up logarithmically unless warmup_type is linear; zt warms up linearly.
void read_warmup(Section& p, TrainConfig& t, TakeOver& take, std::vector<std::string>& warnings,
                 const Node& type_node) {
  int64_t warmup = 1000;  // DeepSpeed's warmup_num_steps default
  note_default(take, p, "warmup_num_steps", "warmup",
               "DeepSpeed's default warmup of 1000 updates applies", warnings, type_node);
  std::string warmup_type = "log";
  p.get("warmup_num_steps", warmup, 0).get_enum("warmup_type", warmup_type, {"log", "linear"});
  // DeepSpeed's WarmupLR and WarmupCosineLR raise on 0 (older ones ran max(2, 0) updates).
  if (warmup == 0)
    p.fail("warmup_num_steps",
           "must be a positive integer, got 0 (DeepSpeed refuses 0 too); a warmup lasts at "
           "least 2 updates, so give 1 or 2 for the shortest one");
  if (p.node() && p.node().has("warmup_type") && warmup_type == "log")
    p.fail("warmup_type", "zt warms up linearly; set warmup_type: linear");
  if (!(p.node() && p.node().has("warmup_type")))
    warnings.push_back(type_node.where() + ": " + type_node.path() +
                       ": DeepSpeed's default warmup is logarithmic; zt warms up linearly "
                       "(set params.warmup_type: linear to say so)");
  Node n = p.node() ? p.node().get("warmup_num_steps") : Node();
  take("warmup", t.warmup, warmup, n ? n : type_node);
}

void read_scheduler(Section sc, TrainConfig& t, TakeOver& take,
                    std::vector<std::string>& warnings) {
  std::string type;
  sc.get("type", type);
  if (!sc.has("type"))
    sc.fail("type", "the scheduler needs a type: WarmupLR, WarmupDecayLR or WarmupCosineLR");
  const Node type_node = sc.node().get("type");
  Section p = sc.sub("params");
  auto at = [&](const std::string& key) {
    Node n = p.node() ? p.node().get(key) : Node();
    return n ? n : type_node;
  };
  if (type == "WarmupLR" || type == "WarmupDecayLR") {
    double min_lr = 0, max_lr = 0.001;  // DeepSpeed's warmup_max_lr default
    if (t.lr != max_lr)
      note_default(take, p, "warmup_max_lr", "lr",
                   "the learning rate rises to DeepSpeed's default warmup_max_lr, 0.001, in "
                   "place of the optimizer's " +
                       text(t.lr),
                   warnings, type_node);
    p.get("warmup_min_lr", min_lr, 0.0).get("warmup_max_lr", max_lr, 0.0, 10.0);
    if (min_lr != 0) p.fail("warmup_min_lr", "zt warms up from 0; set warmup_min_lr: 0");
    read_warmup(p, t, take, warnings, type_node);
    take("lr", t.lr, max_lr, at("warmup_max_lr"));
    if (type == "WarmupLR") {
      take("schedule", t.schedule, Schedule::constant, type_node);
    } else {
      int64_t total = 0;
      p.get("total_num_steps", total, 1);
      if (total == 0) p.fail("total_num_steps", "WarmupDecayLR needs total_num_steps");
      take("steps", t.steps, total, at("total_num_steps"));
      take("schedule", t.schedule, Schedule::linear, type_node);
      take("min_lr", t.min_lr, 0.0, type_node);
    }
  } else if (type == "WarmupCosineLR") {
    double min_ratio = 0, cos_min_ratio = 1e-4;  // DeepSpeed's default floor
    int64_t total = 0;
    p.get("total_num_steps", total, 1)
        .get("warmup_min_ratio", min_ratio, 0.0, 1.0)
        .get("cos_min_ratio", cos_min_ratio, 0.0, 1.0);
    if (total == 0) p.fail("total_num_steps", "WarmupCosineLR needs total_num_steps");
    if (min_ratio != 0) p.fail("warmup_min_ratio", "zt warms up from 0; set warmup_min_ratio: 0");
    read_warmup(p, t, take, warnings, type_node);
    take("steps", t.steps, total, at("total_num_steps"));
    take("schedule", t.schedule, Schedule::cosine, type_node);
    take("min_lr", t.min_lr, cos_min_ratio * t.lr, at("cos_min_ratio"));
  } else {
    type_node.fail("scheduler '" + type +
                   "' is not supported by zt: use WarmupLR, WarmupDecayLR or WarmupCosineLR "
                   "(OneCycle and LRRangeTest are not implemented)");
  }
  t.deepspeed_schedule = true;
  p.finish();
  sc.finish();
}

}  // namespace

std::string read_deepspeed_file(const std::string& path) {
  return read_config_text(path, "DeepSpeed config");
}

Node parse_deepspeed_text(const std::string& text, const std::string& path) {
  const Node root = parse_yaml_value(detail::hjson_as_yaml(text, path), path, /*json=*/true);
  std::error_code ec;  // read from standard input, a pipe or a FIFO: one reader gets the text
  const bool stream =
      std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec);
  if (root.is_null() || (root.is_map() && root.size() == 0))
    throw Error(path +
                ": the DeepSpeed config is empty (no keys: only blank lines, comments or {}); " +
                (stream ? "it is no regular file, and standard input, a pipe or a FIFO gives its "
                          "text to one reader (under mpirun, standard input reaches rank 0 "
                          "alone): pass the DeepSpeed config as a file"
                        : "give the settings it should set, e.g. "
                          "{\"train_micro_batch_size_per_gpu\": 4}, or leave it out"));
  if (!root.is_map()) root.fail("the top level must be a JSON object ({\"key\": value, ...})");
  // Hugging Face's Trainer fills in each "auto" from its own arguments before DeepSpeed reads
  // the file; read as written, one key at a time would fail as a wrong type.
  std::vector<Node> autos;
  std::function<void(const Node&)> find_autos = [&](const Node& n) {
    if (n.is_scalar() && n.scalar() == "auto") autos.push_back(n);
    if (n.is_map())
      for (const std::string& k : n.keys()) find_autos(n.get(k));
    if (n.is_sequence())
      for (size_t i = 0; i < n.size(); ++i) find_autos(n.at(i));
  };
  find_autos(root);
  if (!autos.empty()) {
    std::string keys;
    for (const Node& n : autos)
      keys += (keys.empty() ? "" : ", ") + n.path() + " (line " + std::to_string(n.line()) + ")";
    autos[0].fail(
        "\"auto\" is a placeholder that Hugging Face's Trainer fills in from its own arguments "
        "before DeepSpeed reads the file; zt reads the file as written: give each a value, or "
        "delete the key (the YAML's setting, or zt's default, then applies): " +
        keys);
  }
  return root;
}

namespace {

// DeepSpeed's activation_checkpointing section tunes deepspeed.checkpointing, which a
// model's code calls; the section turns nothing on. zt recomputes the blocks that
// train.activation_checkpointing names, keeps their saved inputs where they are, on their
// own rank, and times nothing: asking to move the inputs is an error, the rest changes
// nothing.
void read_activation_checkpointing(const Node& n, AppConfig& c) {
  if (!n.is_map())
    n.fail(
        "expected an object of settings ({\"partition_activations\": false, ...}); the "
        "section turns nothing on: to recompute activations set "
        "train.activation_checkpointing: true");
  Section s(n);
  bool partition = false, cpu = false, contiguous = false, synchronize = false, profile = false;
  s.get("partition_activations", partition)
      .get("cpu_checkpointing", cpu)
      .get("contiguous_memory_optimization", contiguous)
      .get("synchronize_checkpoint_boundary", synchronize)
      .get("profile", profile);
  const Node number = s.take_or_null("number_checkpoints");
  s.finish();
  if (partition)
    s.fail("partition_activations",
           "zt does not partition checkpointed activations across ranks (each rank keeps its "
           "own blocks' inputs); set it to false");
  if (cpu)
    s.fail("cpu_checkpointing",
           "zt keeps checkpointed activations on the device they were computed on; set it to "
           "false");
  auto no_effect = [&](const char* key) {
    const Node v = n.get(key);
    c.warnings.push_back(v.where() + ": " + v.path() + ": has no effect in zt");
  };
  if (contiguous) no_effect("contiguous_memory_optimization");
  if (synchronize) no_effect("synchronize_checkpoint_boundary");
  if (profile) no_effect("profile");
  if (number) no_effect("number_checkpoints");
  if (!c.train.activation_checkpointing)
    c.warnings.push_back(n.where() + ": " + n.path() +
                         ": DeepSpeed's section does not turn recomputation on (the model's "
                         "code does); in zt set train.activation_checkpointing: true");
}

}  // namespace

void apply_deepspeed(const Node& ds, const Node& yaml, AppConfig& c) {
  Section s(ds);
  // DeepSpeed still reads its older name of bf16; zt reads the one name its errors give.
  if (const Node n = s.take("bfloat16"))
    n.fail("DeepSpeed's older name of the bf16 section; zt reads it as \"bf16\": rename it");
  if (Node n = s.take("activation_checkpointing")) read_activation_checkpointing(n, c);
  for (const auto& [key, instead] : kUnsupported)
    if (Node n = s.take(key); n && !turned_off(key, n, c.zero.precision))
      n.fail("not supported by zt (" + instead + "); remove it or turn it off");
  // DeepSpeed averages 16-bit gradients in their own dtype by default; zt's are fp32.
  if (const Node n = ds.get("communication_data_type");
      n && n.as_string() != "fp32" && n.as_string() == trained_dtype_name(c.zero.precision))
    c.warnings.push_back(n.where() + ": " + n.path() +
                         ": has no effect in zt (zt reduces gradients in fp32 at every "
                         "precision; parameters are gathered in " +
                         n.as_string() + ")");
  for (const std::string& key : kNoEffect)
    if (Node n = s.take(key))
      c.warnings.push_back(n.where() + ": " + n.path() + ": has no effect in zt");

  const Node yaml_train = yaml.get("train");
  TrainConfig& t = c.train;
  TakeOver take{yaml_train, c.warnings};
  int64_t micro = t.batch, accumulation = t.gradient_accumulation_steps, log_every = t.log_every;
  double clip = t.gradient_clipping;
  s.get("train_micro_batch_size_per_gpu", micro, 1, kMaxBatch)
      .get("gradient_accumulation_steps", accumulation, 1, 1 << 20)
      .get("train_batch_size", c.train_batch_size, 1)
      .get("gradient_clipping", clip, 0.0)
      .get("steps_per_print", log_every, 1);
  auto at = [&](const char* key) { return ds.get(key); };
  if (Node n = at("train_micro_batch_size_per_gpu")) take("batch", t.batch, micro, n);
  if (Node n = at("gradient_accumulation_steps"))
    take("gradient_accumulation_steps", t.gradient_accumulation_steps, accumulation, n);
  if (Node n = at("train_batch_size")) {
    c.train_batch_size_where = n.where();
    if (!at("train_micro_batch_size_per_gpu") &&
        !(yaml_train && yaml_train.is_map() && yaml_train.has("batch")))
      n.fail(
          "zt needs train_micro_batch_size_per_gpu (or train.batch in the YAML) beside "
          "train_batch_size; the world size is known only at launch");
  }
  if (Node n = at("gradient_clipping")) take("gradient_clipping", t.gradient_clipping, clip, n);
  if (Node n = at("steps_per_print")) take("log_every", t.log_every, log_every, n);
  if (Node n = s.take("optimizer")) read_optimizer(Section(n), t, take);
  // The scheduler's defaults and warmup are training's alone (sample and eval keep quiet).
  if (Node n = s.take("scheduler")) read_scheduler(Section(n), t, take, c.training_warnings);
  if (t.min_lr > t.lr && has_lr_floor(t.schedule)) {
    const Node floor = yaml_train && yaml_train.is_map() ? yaml_train.get("min_lr") : Node();
    throw Error(ds.file() + ": the schedule's floor train.min_lr (" + text(t.min_lr) +
                (floor ? ", from " + floor.where() : std::string()) +
                ") exceeds the learning rate (" + text(t.lr) +
                "); lower train.min_lr or raise the optimizer's lr");
  }

  // zero_optimization, bf16 and fp16 were read with the YAML's engine sections.
  for (const char* key : {"zero_optimization", "bf16", "fp16"}) s.take(key);
  c.zero.gradient_clipping = t.gradient_clipping;
  c.zero.gradient_accumulation_steps = static_cast<int>(t.gradient_accumulation_steps);
  s.finish();
}

void check_world_size(const AppConfig& c, int world_size) {
  if (c.train_batch_size <= 0) return;
  // In 128 bits: a world of MPI processes times the largest batches passes 2^63.
  const __int128 got =
      static_cast<__int128>(c.train.batch) * c.train.gradient_accumulation_steps * world_size;
  if (got == c.train_batch_size) return;
  std::ostringstream os;
  os << c.train_batch_size_where << ": train_batch_size: " << c.train_batch_size
     << " must equal train_micro_batch_size_per_gpu x gradient_accumulation_steps x world size"
     << " = " << c.train.batch << " x " << c.train.gradient_accumulation_steps << " x "
     << world_size << " = "
     << (got <= std::numeric_limits<int64_t>::max() ? std::to_string(static_cast<int64_t>(got))
                                                    : std::string("more than 2^63"));
  const int64_t per_rank = c.train.batch * world_size;
  if (c.train_batch_size % per_rank == 0)
    os << "; on " << counted(world_size, "rank")
       << " set gradient_accumulation_steps: " << c.train_batch_size / per_rank;
  else
    os << "; change train_batch_size or the number of ranks";
  throw Error(os.str());
}

}  // namespace zt::config
