// Reads an AppConfig from a config tree, section by section, then checks the constraints
// that span sections (the model's factors against the clip size, GPT sizes against the
// tokenizer). Each error points at the key that has to change.
#include "configs/app_config.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include "configs/data_section.h"
#include "configs/deepspeed.h"
#include "configs/zero_sections.h"
#include "core/allocator.h"
#include "core/error.h"

namespace zt::config {

const std::vector<std::pair<std::string, Optimizer>> kOptimizerNames = {
    {"adamw", Optimizer::adamw}, {"adam", Optimizer::adam}, {"sgd", Optimizer::sgd}};
const std::vector<std::pair<std::string, Schedule>> kScheduleNames = {
    {"constant", Schedule::constant},
    {"cosine", Schedule::cosine},
    {"linear", Schedule::linear},
    {"step", Schedule::step}};
const char* optimizer_name(Optimizer o) {
  return enum_name(kOptimizerNames, o);
}

const char* schedule_name(Schedule s) {
  return enum_name(kScheduleNames, s);
}

namespace {

void read_model(Section s, ModelConfig& m) {
  for_each_model_key([&](const char* key, auto member, auto lo, auto hi, bool) {
    auto& field = m.*member;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, bool>)
      s.get(key, field);
    else
      s.get(key, field, lo, hi);
  });
  s.finish();
  if (m.embed_dim != m.z_channels)
    s.fail("embed_dim", "embed_dim (" + std::to_string(m.embed_dim) + ") must equal z_channels (" +
                            std::to_string(m.z_channels) +
                            "): the quantizer works on the encoder's z directly");
  if (const int64_t t = m.temporal_downsample_factor; t <= 0 || (t & (t - 1)) != 0)
    s.fail("temporal_downsample_factor", "must be a power of two (1, 2, 4, ...), got " +
                                             std::to_string(m.temporal_downsample_factor));
  if (m.ch % 32 != 0)
    s.fail("ch",
           "must be a multiple of 32 (GroupNorm uses 32 groups), got " + std::to_string(m.ch));
  if (m.ch_mult.empty() || m.ch_mult.size() > 8)
    s.fail("ch_mult", "needs 1 to 8 levels, e.g. [1, 2, 2, 4]");
  for (size_t i = 0; i < m.attn_resolutions.size(); ++i)
    if (const int64_t a = m.attn_resolutions[i]; a >= static_cast<int64_t>(m.ch_mult.size()))
      s.fail_element("attn_resolutions", i,
                     "level " + std::to_string(a) + " does not exist: ch_mult has " +
                         std::to_string(m.ch_mult.size()) +
                         " levels (attn_resolutions are level indices, not pixels)");
}

// train.param_groups: [{params: [patterns], lr_scale: x, weight_decay: y}, ...].
void read_param_groups(const Node& list, std::vector<optim::ParamGroup>& out) {
  if (!list) return;
  if (!list.is_sequence())
    list.fail("expected a list of {params: [name patterns], lr_scale: x, weight_decay: y}");
  for (size_t i = 0; i < list.size(); ++i) {
    Section g(list.at(i));
    optim::ParamGroup pg;
    g.get("params", pg.params).get("lr_scale", pg.lr_scale, 0.0, 1e6);
    if (g.has("weight_decay")) {  // absent: as outside any group
      double wd = 0.0;
      g.get("weight_decay", wd, 0.0, 10.0);
      pg.weight_decay = wd;
    }
    g.finish();
    if (pg.params.empty())
      g.fail("params",
             "each group needs params: a list of parameter name patterns, e.g. "
             "[\"gpt.wte.*\"]");
    for (const std::string& pattern : pg.params)
      if (pattern.empty()) g.fail("params", "a pattern is empty");
    out.push_back(std::move(pg));
  }
}

void read_train(Section s, TrainConfig& t) {
  std::vector<double> betas(t.betas.begin(), t.betas.end());
  s.get("steps", t.steps, 1)
      .get("batch", t.batch, 1, kMaxBatch)
      .get_enum("optimizer", t.optimizer, kOptimizerNames)
      .get("lr", t.lr, 0.0, 10.0)
      .get_enum("schedule", t.schedule, kScheduleNames)
      .get("warmup", t.warmup, 0)
      .get("min_lr", t.min_lr, 0.0, 10.0)
      .get("step_size", t.step_size, 1)
      .get("gamma", t.gamma, 0.0, 1.0)
      .get("weight_decay", t.weight_decay, 0.0, 10.0)
      .get("weight_decay_1d", t.weight_decay_1d)
      .get("no_weight_decay", t.no_weight_decay)
      .get("betas", betas)
      .get("eps", t.eps, 0.0, 1.0)
      .get("momentum", t.momentum, 0.0, 1.0)
      .get("dampening", t.dampening, 0.0, 1.0)
      .get("nesterov", t.nesterov)
      .get("gradient_clipping", t.gradient_clipping, 0.0)
      .get("gradient_accumulation_steps", t.gradient_accumulation_steps, 1, 1 << 20)
      .get("log_every", t.log_every, 1)
      .get("eval_every", t.eval_every, 0)
      .get("eval_batches", t.eval_batches, 0, kMaxBatch)
      .get("checkpoint_every", t.checkpoint_every, 0)
      .get("keep_checkpoints", t.keep_checkpoints, 0, std::numeric_limits<int>::max())
      .get("codebook_restart_every", t.codebook_restart_every, 0)
      .get("seed", t.seed, 0)
      .get_enum("device", t.device, {"cpu", "cuda"})
      .get_enum("tf32", t.tf32, {"conv", "all", "none"})
      .get("cudnn_deterministic", t.cudnn_deterministic)
      .get_enum("attention", t.attention, {"auto", "flash", "math"})
      .get_enum("flash_backward", t.flash_backward, {"split", "atomic"})
      .get_enum("dtype", t.dtype, {"f32", "bf16", "f16"})
      .get("resume", t.resume)
      .get("trace", t.trace)
      .get("trace_steps", t.trace_steps, 1, 1 << 20)
      .get("tensorboard", t.tensorboard)
      .get("cuda_graph", t.cuda_graph)
      .get("activation_checkpointing", t.activation_checkpointing);
  if (t.schedule == Schedule::step && t.gamma <= 0)  // 0 would stop training at step_size
    s.fail("gamma", "must be in (0, 1], got " + std::to_string(t.gamma));
  for (auto [key, field] : {std::pair{"cudnn_benchmark", &t.cudnn_benchmark},
                            std::pair{"gemm_benchmark", &t.gemm_benchmark}})
    if (s.has(key)) {
      bool on = false;
      s.get(key, on);
      *field = on;
    }
  read_param_groups(s.raw("param_groups"), t.param_groups);
  s.finish();
  if (t.cuda_graph && t.device != "cuda")
    s.fail("cuda_graph", "CUDA graphs need device: cuda (the device is " + t.device + ")");
  if (t.cuda_graph && t.gradient_accumulation_steps > 1)
    s.fail("cuda_graph", "a graph holds one whole step: set gradient_accumulation_steps to 1");
  if (betas.size() != 2) s.fail("betas", "expected two values, e.g. [0.9, 0.999]");
  for (size_t i = 0; i < betas.size(); ++i)
    if (!(betas[i] >= 0.0 && betas[i] < 1.0))
      s.fail_element("betas", i, "each beta must be in [0, 1)");
  t.betas = {betas[0], betas[1]};
  for (const std::string& pattern : t.no_weight_decay)
    if (pattern.empty())
      s.fail("no_weight_decay",
             "a pattern is empty; write a parameter name, '*' for any run "
             "of characters (\"*.bias\")");
  // Adam divides by sqrt(v) + eps, and v is 0 where a gradient has been 0 (0 / 0 = NaN).
  if (t.eps == 0.0 && t.optimizer != Optimizer::sgd)
    s.fail("eps",
           "eps must be > 0 with adam and adamw (it keeps m / (sqrt(v) + eps) finite "
           "where gradients are 0); the usual value is 1.0e-8");
}

void read_loss(Section s, LossConfig& l) {
  s.get("l2", l.l2, 0.0)
      .get("l1", l.l1, 0.0)
      .get("vq", l.vq, 0.0)
      .get("commitment", l.commitment, 0.0);
  s.finish();
  if (l.l1 == 0.0 && l.l2 == 0.0) s.fail("l2", "l1 and l2 are both 0: nothing to reconstruct");
}

void read_gpt(Section s, GptConfig& g) {
  s.get("vocab_size", g.vocab_size, 0)
      .get("n_layer", g.n_layer, 1, 1024)
      .get("n_head", g.n_head, 1, 1024)
      .get("n_embd", g.n_embd, 1, 1 << 16)
      .get("block_size", g.block_size, 0, 1 << 24)
      .get("dropout", g.dropout, 0.0, 0.99)
      .get("tie_embeddings", g.tie_embeddings)
      .get("fused_qkv", g.fused_qkv)
      .get("tokenizer_checkpoint", g.tokenizer_checkpoint);
  s.finish();
  if (g.n_embd % g.n_head != 0) {
    // A constraint of two keys: located at the one set apart from the section (a --set: the
    // latest change), else at n_embd where written, and naming where the other was set.
    const Node& section = s.node();
    auto node = [&](const char* key) { return section.is_map() ? section.get(key) : Node(); };
    const Node head = node("n_head"), embd = node("n_embd");
    auto set_apart = [&](const Node& n) { return n && n.file() != section.file(); };
    auto set_at = [](const Node& n) { return n ? "set at " + n.where() : std::string("default"); };
    const std::string e = std::to_string(g.n_embd), h = std::to_string(g.n_head);
    const std::string why = ": each head takes n_embd / n_head channels";
    if ((set_apart(head) && !set_apart(embd)) || !embd)
      s.fail("n_head", "gpt.n_head (" + h + ") must divide gpt.n_embd (" + e + ", " + set_at(embd) +
                           ")" + why);
    s.fail("n_embd", "gpt.n_embd (" + e + ") must be a multiple of gpt.n_head (" + h + ", " +
                         set_at(head) + ")" + why);
  }
  // An empty tokenizer_checkpoint is no error here: `train --tokenizer`, `tokenizer --out`,
  // `plan` (a random tokenizer) and a resume (the checkpoint's) need none, and the commands
  // that do need it say so and how to train one.
}

// Keys the YAML sets that the rest of the final config (after a DeepSpeed config) leaves
// without effect: a warning each, naming the key and what it would apply to. (Not errors:
// switching the optimizer or schedule by one key leaves the other's settings harmless.)
// The YAML's train checks that a DeepSpeed JSON's settings may change, on the settings
// as merged, located at the YAML's key (a JSON's own keys are checked where it is read).
void check_merged_train(const Node& root, const AppConfig& c) {
  const TrainConfig& t = c.train;
  const Node train = root.get("train");
  auto at = [&](const char* key) { return train && train.is_map() ? train.get(key) : Node(); };
  auto fail_at = [&](const char* key, const std::string& msg) {
    if (const Node n = at(key)) n.fail(msg);
    throw Error("train." + std::string(key) + ": " + msg);
  };
  if (t.min_lr > t.lr && has_lr_floor(t.schedule))
    fail_at("min_lr",
            zt::detail::cat("min_lr (", t.min_lr, ") must not exceed lr (", t.lr, ", ",
                            at("lr") ? "set at " + at("lr").where() : "its default", ")"));
  if (t.optimizer == Optimizer::sgd && t.nesterov) {
    const std::string why = nesterov_problem(t.momentum, t.dampening);
    if (!why.empty()) fail_at("nesterov", why);
  }
}

void note_inapplicable(const Node& root, AppConfig& c, App app) {
  const TrainConfig& t = c.train;
  const std::string opt = optimizer_name(t.optimizer);
  const std::string sched = schedule_name(t.schedule);
  auto note = [&](std::vector<std::string>& to, const char* section, const char* key, bool applies,
                  const std::string& why) {
    const Node s = root.get(section);
    const Node n = s && s.is_map() ? s.get(key) : Node();
    if (n && !applies) to.push_back(n.where() + ": " + n.path() + " has no effect " + why);
  };
  auto &general = c.warnings, &training = c.training_warnings;  // training: what it alone reads
  const bool sgd = t.optimizer == Optimizer::sgd;
  for (const char* key : {"momentum", "dampening", "nesterov"})
    note(training, "train", key, sgd, "with optimizer " + opt + " (it is sgd's)");
  for (const char* key : {"betas", "eps"})
    note(training, "train", key, !sgd, "with optimizer sgd (it is adam's and adamw's)");
  for (const char* key : {"step_size", "gamma"})
    note(training, "train", key, t.schedule == Schedule::step,
         "with schedule " + sched + " (it is schedule step's)");
  note(training, "train", "min_lr", has_lr_floor(t.schedule),
       "with schedule " + sched + " (it is the floor of cosine and linear)");
  note(training, "train", "trace_steps", !t.trace.empty(), "without train.trace");
  note(training, "train", "keep_checkpoints", t.checkpoint_every > 0,
       "with train.checkpoint_every 0 (no checkpoint is written)");
  for (const char* key : {"tf32", "cudnn_benchmark", "cudnn_deterministic", "gemm_benchmark"})
    note(general, "train", key, t.device == "cuda",
         "on device " + t.device + " (it sets the GPU's libraries)");
  // The fused attention kernels run on a GPU under attention auto, anywhere under flash
  // (unset: ZT_ATTENTION may pick them).
  note(training, "train", "flash_backward",
       t.attention != "math" && (t.device == "cuda" || t.attention != "auto"),
       "with train.attention " + t.attention +
           (t.attention == "auto" ? " on device " + t.device : "") +
           " (it sets the fused attention kernels' backward; they run on a GPU under attention "
           "auto, anywhere under flash)");
  note(training, "train", "warmup", t.warmup <= t.steps || t.deepspeed_schedule,
       "beyond train.steps (" + std::to_string(t.steps) +
           "): the warmup is cut to the run, and a resume with more steps warms up "
           "again over the longer warmup");
  const bool synthetic = c.data.kind == data::DataKind::synthetic;
  note(general, "data", "path", !synthetic,
       "with data.kind synthetic (it names image_folder or npy data)");
  note(general, "data", "num_shapes", synthetic,
       "with data.kind image_folder or npy (it is synthetic's)");
  note(general, "data", "num_samples", synthetic,
       "with data.kind image_folder or npy (it is synthetic's: the files set the count)");
  // vqgpt's tokenizer is frozen, in eval mode, and holds its model's only BatchNorms.
  const bool vqgpt = app == App::vqgpt;
  note(general, "model", "dropout", !(vqgpt && c.model.dropout > 0),
       "in vqgpt train (its tokenizer is frozen, in eval mode; vqgpt tokenizer reads it)");
  note(general, "zero_optimization", "sync_batchnorm", !(vqgpt && c.zero.sync_batchnorm),
       "in vqgpt (its only BatchNorms are the frozen tokenizer's)");
  note(general, "data", "on_bad_image", c.data.kind == data::DataKind::image_folder,
       std::string("with data.kind ") + data_kind_name(c.data.kind) +
           " for training and eval (it is image_folder's; vqtok encode --input with a folder "
           "of images reads it)");
  for (const char* key : {"resize", "fit"})
    note(general, "data", key, c.data.kind == data::DataKind::image_folder,
         std::string("with data.kind ") + data_kind_name(c.data.kind) +
             " for training and eval (it shapes images: image_folder's, and vqtok encode "
             "--input's with images)");
}

// Cross-section checks: clip sizes against the model's factors, GPT against tokens.
void check_app(Section& root, AppConfig& c) {
  const ModelConfig& m = c.model;
  const data::DataConfig& d = c.data;
  Section data = Section(root.node()).sub("data");
  const int64_t s = m.spatial_factor();
  if (d.height % s != 0 || d.width % s != 0)
    data.fail(d.height % s != 0 ? "height" : "width",
              "height and width must be multiples of " + std::to_string(s) +
                  " (2^(len(model.ch_mult) - 1)), got " + std::to_string(d.height) + "x" +
                  std::to_string(d.width));
  Section model = Section(root.node()).sub("model");
  // Every dataset gives three channels: a .npy file's clips must be (N, T, 3, H, W) or
  // (N, 3, H, W) as well.
  const char* rgb = d.kind == data::DataKind::synthetic      ? "synthetic data is RGB"
                    : d.kind == data::DataKind::image_folder ? "image data is RGB"
                                                             : "npy clips are RGB (zt reads "
                                                               "(N, T, 3, H, W) or (N, 3, H, W) "
                                                               "arrays)";
  if (m.in_channels != 3)
    model.fail("in_channels",
               "in_channels (" + std::to_string(m.in_channels) + ") must be 3: " + rgb);
  if (m.out_channels != m.in_channels)
    model.fail("out_channels", "out_channels (" + std::to_string(m.out_channels) +
                                   ") must equal in_channels (" + std::to_string(m.in_channels) +
                                   "): training compares the reconstruction with the input");
  if (m.code_frames(d.frames) == 0)
    data.fail("frames", "frames (" + std::to_string(d.frames) +
                            ") must be 1 (an image) or a multiple of "
                            "model.temporal_downsample_factor (" +
                            std::to_string(m.temporal_downsample_factor) + ")");
  if (c.gpt) {
    Section gpt = Section(root.node()).sub("gpt");
    GptConfig& g = *c.gpt;
    // Emu3's layout: BOS, each row of codes followed by an end-of-row token, EOS; the ids
    // after the codebook are BOS, EOL, EOS.
    const int64_t specials = 3;
    if (g.vocab_size == 0) g.vocab_size = m.codebook_size + specials;
    if (g.vocab_size < m.codebook_size + specials)
      gpt.fail("vocab_size", "vocab_size (" + std::to_string(g.vocab_size) +
                                 ") must cover the codebook and BOS/EOL/EOS (" +
                                 std::to_string(m.codebook_size + specials) + ")");
    const int64_t rows = c.tokens_per_clip() / (d.width / m.spatial_factor());
    const int64_t need = 1 + c.tokens_per_clip() + rows;  // inputs: BOS + codes + EOLs
    if (g.block_size == 0) g.block_size = need;
    if (g.block_size < need)
      gpt.fail("block_size", "block_size (" + std::to_string(g.block_size) +
                                 ") must hold BOS, a clip's codes and an end-of-row token per "
                                 "row (" +
                                 std::to_string(need) + ")");
  }
}

constexpr const char* kDeepSpeedHint =
    "this file looks like a DeepSpeed config; pass it with --deepspeed (or deepspeed_config: "
    "in the YAML) beside a zt config such as configs/vqtok_tiny.yaml";

// The first top-level key of `root` that only a DeepSpeed config has ("" when none).
std::string deepspeed_key(const Node& root) {
  for (const char* key : {"train_micro_batch_size_per_gpu", "train_batch_size", "steps_per_print"})
    if (root.is_map() && root.has(key)) return key;
  return "";
}

// Each section `app` reads with the keys it takes, as its reader declares them over an
// empty section (the engine's sections may come from a DeepSpeed file instead).
std::vector<std::pair<std::string, std::vector<std::string>>> section_keys(App app) {
  std::vector<std::pair<std::string, std::vector<std::string>>> keys;
  auto read = [&](const char* name, const std::function<void(Section)>& reader) {
    Section empty{Node()};
    reader(empty);
    keys.emplace_back(name, empty.known());
  };
  AppConfig c;
  read("model", [&](Section e) { read_model(e, c.model); });
  read("data", [&](Section e) { read_data(e, c.data); });
  read("train", [&](Section e) { read_train(e, c.train); });
  if (app != App::vqgpt) read("loss", [&](Section e) { read_loss(e, c.loss); });
  if (app != App::vqtok) read("gpt", [&](Section e) { read_gpt(e, c.gpt.emplace()); });
  read("zero_optimization", [&](Section e) { read_zero_optimization(e, c.zero, c.warnings); });
  read("bf16", [&](Section e) { read_mixed_precision(e, Section(Node()), c.warnings); });
  read("fp16", [&](Section e) { read_mixed_precision(Section(Node()), e, c.warnings); });
  read("buffers", [&](Section e) { read_buffers(e, c.zero.buffers); });
  return keys;
}

}  // namespace

std::string nesterov_problem(double momentum, double dampening) {
  if (momentum > 0 && dampening == 0) return "";
  std::ostringstream os;
  os << "Nesterov momentum needs momentum > 0 and dampening 0, got momentum " << momentum
     << " and dampening " << dampening;
  return os.str();
}

int64_t ModelConfig::temporal_layers() const {
  int64_t n = 0;
  for (int64_t f = temporal_downsample_factor; f > 1; f >>= 1) ++n;
  return n;
}

int64_t ModelConfig::code_frames(int64_t frames) const {
  if (frames == 1) return 1;
  return frames % temporal_downsample_factor == 0 ? frames / temporal_downsample_factor : 0;
}

int64_t AppConfig::tokens_per_clip() const {
  const int64_t s = model.spatial_factor();
  return model.code_frames(data.frames) * (data.height / s) * (data.width / s);
}

AppConfig parse_app_config(const Node& root, App app) {
  ZT_CHECK(root, "parse_app_config: the config tree is absent (load it with load_yaml_file)");
  AppConfig c;
  c.root = root;
  c.source = root ? root.file() : "<config>";
  Section s(root);
  // A key written in the wrong section (or at the top level) is named with the sections it
  // belongs in.
  const std::vector<std::pair<std::string, std::vector<std::string>>> keys = section_keys(app);
  s.suggest_elsewhere([&keys](const std::string& key) {
    std::vector<std::string> paths;
    for (const auto& [name, known] : keys)
      if (std::find(known.begin(), known.end(), key) != known.end())
        paths.push_back(name + "." + key);
    return paths;
  });
  read_model(s.sub("model"), c.model);
  read_data(s.sub("data"), c.data);
  read_train(s.sub("train"), c.train);
  if (app == App::vqgpt && root.has("loss"))
    s.fail("loss", "the loss section is for vqtok configs; vqgpt trains with cross-entropy");
  if (app != App::vqgpt) read_loss(s.sub("loss"), c.loss);
  if (app == App::vqgpt && c.train.codebook_restart_every > 0)
    root.get("train")
        .get("codebook_restart_every")
        .fail("restarts codes of a tokenizer in training (vqtok); vqgpt's tokenizer is frozen");
  if (app == App::vqtok && root.has("gpt"))
    s.fail("gpt", "the gpt section is for vqgpt configs; vqtok does not read it");
  if (app != App::vqtok && (root.has("gpt") || app == App::vqgpt)) {
    c.gpt.emplace();
    read_gpt(s.sub("gpt"), *c.gpt);
  }
  Node ds;
  s.get("deepspeed_config", c.deepspeed_config);
  if (!c.deepspeed_config.empty()) {
    // Any file that reads: a FIFO or a shell's <(...) too (read once).
    if (!std::filesystem::exists(c.deepspeed_config))
      root.get("deepspeed_config")
          .fail("no DeepSpeed config at '" + c.deepspeed_config +
                "' (a JSON file; relative paths start at the working directory)");
    if (std::filesystem::is_directory(c.deepspeed_config))
      root.get("deepspeed_config")
          .fail("'" + c.deepspeed_config +
                "' is a folder; name the DeepSpeed config (a JSON file)");
    c.deepspeed_json = read_deepspeed_file(c.deepspeed_config);
    ds = parse_deepspeed_text(c.deepspeed_json, c.deepspeed_config);
  }
  read_engine_sections(s, ds, c);
  if (ds) apply_deepspeed(ds, root, c);
  check_merged_train(root, c);
  note_inapplicable(root, c, app);
  s.get("replicated", c.replicated);
  for (const auto& r : c.replicated)
    if (r.empty()) s.fail("replicated", "module paths must be non-empty (e.g. [tokenizer])");
  if (app == App::vqgpt &&
      std::find(c.replicated.begin(), c.replicated.end(), "tokenizer") == c.replicated.end())
    s.fail("replicated",
           "must name the frozen tokenizer (replicated: [tokenizer]); a partitioned tokenizer "
           "would all-gather its parameters on every call");
  {
    Section m = s.sub("memory");
    std::string limit;
    m.get("limit", limit);
    m.finish();
    if (!limit.empty()) {
      try {
        c.memory_limit = parse_byte_size(limit, "");
      } catch (const Error& e) {
        m.fail("limit", e.what());  // parse_byte_size("") names no key: fail() does
      }
    }
  }
  const std::string stem = std::filesystem::path(c.source).stem().string();
  c.output_dir = "runs/" + (stem.empty() ? std::string("default") : stem);
  s.get("output_dir", c.output_dir);
  if (c.output_dir.empty()) s.fail("output_dir", "must be a non-empty directory path");
  // A DeepSpeed JSON given as the config: its own top-level keys tell, better than the
  // nearest zt key would.
  if (const std::string key = deepspeed_key(root); !key.empty())
    root.get(key).fail(std::string("a DeepSpeed key: ") + kDeepSpeedHint);
  s.finish();
  check_app(s, c);
  return c;
}

std::string read_app_config_text(const std::string& path) {
  return read_config_text(path, "config file",
                          "(pass a path to a .yaml file, e.g. configs/vqtok_tiny.yaml)");
}

AppConfig load_app_config(const std::string& path, const std::vector<Override>& overrides,
                          App app) {
  // Read once: a FIFO or /dev/stdin gives its text to one read only.
  return load_app_config_text(read_app_config_text(path), path, overrides, app);
}

AppConfig load_app_config_text(const std::string& text, const std::string& path,
                               const std::vector<Override>& overrides, App app) {
  Node root;
  try {
    root = load_yaml_text(text, path, overrides);
  } catch (const Error&) {
    // A DeepSpeed JSON with comments (hjson, as DeepSpeed reads it) is no YAML: named for
    // what it is rather than by the parse error.
    Node ds;
    try {
      ds = parse_deepspeed_text(text, path);
    } catch (const std::exception&) {
    }
    if (ds && !deepspeed_key(ds).empty()) throw Error(path + ": " + kDeepSpeedHint);
    throw;
  }
  AppConfig c = parse_app_config(root, app);
  // Two overrides of one key with different values (--set train.steps=4 --steps 8): the
  // later wins, and a warning says so. (load_yaml_file has checked each assignment.)
  auto trimmed = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  std::map<std::string, std::pair<std::string, std::string>> seen;  // key -> value, source
  // A mapping set whole (--set 'train={steps: 2}') replaces the file's: its other keys
  // there go back to their defaults, and a warning names them.
  Node file;  // the file as written, parsed again only for such an override
  for (const Override& o : overrides) {
    const size_t eq = o.assignment.find('=');
    const std::string key = trimmed(o.assignment.substr(0, eq));
    const std::string value = trimmed(o.assignment.substr(eq + 1));
    if (auto it = seen.find(key); it != seen.end() && it->second.first != value)
      c.warnings.push_back(o.source + " replaces " + it->second.second + " (" + key + ": " + value +
                           ")");
    seen[key] = {value, o.source};
    // A scalar or a list replaces no mapping's keys; an empty mapping ({}) replaces them all.
    // (load_yaml_file has parsed the value already.)
    const Node after = parse_yaml_value(value, o.source);
    if (!after.is_map()) continue;
    if (!file) file = load_yaml_text(text, path);
    Node before = file;
    std::stringstream parts(key);
    for (std::string part; before && std::getline(parts, part, '.');)
      before = before.is_map() ? before.get(part) : Node();
    if (!before || !before.is_map()) continue;
    std::string dropped;
    for (const std::string& k : before.keys())
      if (!after.get(k)) dropped += (dropped.empty() ? "" : ", ") + k;
    if (!dropped.empty())
      c.warnings.push_back(
          o.source + " sets all of " + key + ": the keys " + before.where() + " gives it (" +
          dropped + ") go back to their defaults (to change one key, --set " + key + ".<key>=...)");
  }
  return c;
}

}  // namespace zt::config
