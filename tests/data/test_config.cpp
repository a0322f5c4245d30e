// Config loading: the tree keeps file/line/path, Section reads strictly, --set
// overrides any key, the shipped configs load, and a table of bad configs each fails
// with the message a user needs (file:line, key path, and what to do).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/test_util.h"
#include "configs/app_config.h"
#include "configs/config.h"
#include "core/dtype.h"
#include "core/error.h"

namespace zt::config {
namespace {

std::string write_temp(const std::string& sub, const std::string& name, const std::string& text) {
  return test::write_temp_file("zt_config_test", sub, name, text);
}

using test::error_of;

TEST(Config, TreeKeepsLocations) {
  Node root = parse_yaml("train:\n  steps: 10\n  betas: [0.9, 0.99]\n", "x.yaml");
  Node steps = root["train"]["steps"];
  ASSERT_TRUE(steps);
  EXPECT_EQ(steps.as_int(), 10);
  EXPECT_EQ(steps.line(), 2);
  EXPECT_EQ(steps.path(), "train.steps");
  EXPECT_EQ(steps.where(), "x.yaml:2");
  EXPECT_EQ(root["train"]["betas"].at(1).path(), "train.betas.1");
  EXPECT_FALSE(root["nope"]);
  EXPECT_EQ(root["train"].keys(), (std::vector<std::string>{"steps", "betas"}));
}

TEST(Config, ScalarConversions) {
  Node r = parse_yaml("a: 5e8\nb: 1.5e-3\nc: yes\nd: hello\ne: -3\nf: .nan\ng: nan\n");
  EXPECT_EQ(r["a"].as_int(), 500000000);
  EXPECT_DOUBLE_EQ(r["b"].as_double(), 1.5e-3);
  EXPECT_TRUE(r["c"].as_bool());
  EXPECT_EQ(r["d"].as_string(), "hello");
  EXPECT_EQ(r["e"].as<int>(), -3);
  EXPECT_NE(error_of([&] { r["b"].as_int(); }).find("expected an integer, got '1.5e-3'"),
            std::string::npos);
  for (const char* key : {"f", "g"})
    EXPECT_NE(error_of([&] { r[key].as_double(); }).find("' (NaN: not a number)"),
              std::string::npos)
        << key;
}

TEST(Config, SectionReadsDeclaredKeysAndKeepsDefaults) {
  struct {
    int64_t steps = 7;
    double lr = 0.5;
    std::string schedule = "constant";
    bool flag = false;
  } cfg;
  Node r = parse_yaml("steps: 3\nschedule: cosine\n");
  Section s(r);
  s.get("steps", cfg.steps, 1).get("lr", cfg.lr, 0.0, 1.0).get("flag", cfg.flag);
  s.get_enum("schedule", cfg.schedule, {"constant", "cosine"});
  s.finish();
  EXPECT_EQ(cfg.steps, 3);
  EXPECT_EQ(cfg.lr, 0.5);  // missing: default kept
  EXPECT_EQ(cfg.schedule, "cosine");
}

TEST(Config, OverridesCreateAndReplace) {
  Node r = parse_yaml("train:\n  lr: 0.1\nmodel:\n  ch_mult: [1, 2]\n", "o.yaml");
  apply_override(r, "train.lr=0.01");
  apply_override(r, "train.steps=5");
  apply_override(r, "model.ch_mult.1=4");
  apply_override(r, "data.frames=8");
  EXPECT_DOUBLE_EQ(r["train"]["lr"].as_double(), 0.01);
  EXPECT_EQ(r["train"]["lr"].file(), "--set train.lr=0.01");
  EXPECT_EQ(r["train"]["steps"].as_int(), 5);
  EXPECT_EQ(r["model"]["ch_mult"].as<std::vector<int64_t>>(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(r["data"]["frames"].as_int(), 8);
  apply_override(r, "model.ch_mult=[1, 2, 2]");
  EXPECT_EQ(r["model"]["ch_mult"].size(), 3u);
  EXPECT_NE(error_of([&] { apply_override(r, "train.lr"); }).find("expected key.path=value"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_override(r, "train.lr.x=1"); }).find("is a single value"),
            std::string::npos);
}

TEST(Config, EditDistance) {
  EXPECT_EQ(edit_distance("stpes", "steps"), 2u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("lr", "lr"), 0u);
}

TEST(Config, MemoryLimitIsAByteSize) {
  Node root = parse_yaml("memory: {limit: 64MiB}\n", "mem.yaml");
  EXPECT_EQ(parse_app_config(root, App::vqtok).memory_limit, int64_t{64} << 20);
  EXPECT_EQ(
      parse_app_config(parse_yaml("train: {steps: 1}\n", "none.yaml"), App::vqtok).memory_limit, 0);
  const std::string msg = error_of(
      [] { parse_app_config(parse_yaml("memory: {limit: lots}\n", "bad.yaml"), App::vqtok); });
  EXPECT_NE(msg.find("bad.yaml:1: memory.limit: 'lots' is not a byte size"), std::string::npos)
      << msg;
  const std::string minus = error_of(
      [] { parse_app_config(parse_yaml("memory: {limit: -1}\n", "minus.yaml"), App::vqtok); });
  EXPECT_NE(minus.find("minus.yaml:1: memory.limit: '-1' is not a byte size"), std::string::npos)
      << minus;  // the key once
}

// Adam divides by sqrt(v) + eps; with eps 0 a parameter whose gradients are 0 gets 0 / 0.
TEST(Config, AdamNeedsAPositiveEps) {
  for (const char* optimizer : {"adam", "adamw"}) {
    const std::string msg = error_of([&] {
      parse_app_config(
          parse_yaml(std::string("train: {optimizer: ") + optimizer + ", eps: 0}\n", "eps.yaml"),
          App::vqtok);
    });
    EXPECT_NE(msg.find("eps.yaml:1: train.eps: eps must be > 0 with adam and adamw"),
              std::string::npos)
        << msg;
  }
  EXPECT_EQ(parse_app_config(parse_yaml("train: {optimizer: sgd, eps: 0}\n"), App::vqtok).train.eps,
            0.0);  // SGD does not read it
}

TEST(Config, ShippedConfigsLoad) {
  const std::string dir = std::string(ZT_SOURCE_DIR) + "/configs/";
  AppConfig tiny = load_app_config(dir + "vqtok_tiny.yaml", {}, App::vqtok);
  EXPECT_EQ(tiny.model.codebook_size, 256);
  EXPECT_TRUE(tiny.zero.sync_batchnorm);
  EXPECT_EQ(tiny.model.ch, 32);
  EXPECT_EQ(tiny.model.ch_mult, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(tiny.model.spatial_factor(), 4);
  EXPECT_EQ(tiny.model.temporal_layers(), 0);
  EXPECT_TRUE(tiny.model.l2_norm_codes);
  EXPECT_EQ(tiny.model.out_init_scale, 0.0);
  EXPECT_EQ(tiny.data.kind, data::DataKind::synthetic);
  EXPECT_EQ(tiny.train.batch, 4);
  EXPECT_EQ(tiny.train.schedule, Schedule::cosine);
  EXPECT_EQ(tiny.tokens_per_clip(), 64);
  EXPECT_EQ(tiny.output_dir, "runs/vqtok_tiny");
  EXPECT_EQ(tiny.zero.stage, 3);
  EXPECT_TRUE(tiny.zero.overlap_comm);
  EXPECT_EQ(tiny.zero.reduce_bucket_size, 500000);
  EXPECT_EQ(tiny.zero.stage3_param_persistence_threshold, 1000);
  EXPECT_EQ(tiny.zero.precision.dtype(), DType::f32);
  EXPECT_DOUBLE_EQ(tiny.zero.gradient_clipping, 1.0);
  EXPECT_EQ(tiny.zero.buffers.verify_every, 50);
  EXPECT_TRUE(tiny.warnings.empty());
  EXPECT_FALSE(tiny.gpt.has_value());

  AppConfig big = load_app_config(dir + "emu3_vision_tokenizer.yaml", {}, App::vqtok);
  EXPECT_EQ(big.model.codebook_size, 32768);
  EXPECT_EQ(big.model.ch, 256);
  EXPECT_EQ(big.tokens_per_clip(), 4096);
  // train.dtype: bf16 is the bf16 section enabled.
  EXPECT_TRUE(big.zero.precision.bf16);
  EXPECT_FALSE(big.zero.precision.fp16);
  EXPECT_EQ(big.train.dtype, "bf16");
  ASSERT_EQ(big.warnings.size(), 1u);
  EXPECT_NE(big.warnings[0].find("emu3_vision_tokenizer.yaml:65: "
                                 "zero_optimization.stage3_gather_16bit_weights_on_model_save: "
                                 "true has no effect in zt"),
            std::string::npos)
      << big.warnings[0];
  EXPECT_FALSE(big.model.l2_norm_codes);
  EXPECT_EQ(big.model.out_init_scale, 1.0);

  AppConfig gpt = load_app_config(dir + "vqgpt_tiny.yaml", {}, App::vqgpt);
  ASSERT_TRUE(gpt.gpt.has_value());
  EXPECT_EQ(gpt.gpt->n_layer, 4);
  EXPECT_EQ(gpt.gpt->vocab_size, 259);
  EXPECT_EQ(gpt.data.num_shapes, 1);
  EXPECT_EQ(gpt.gpt->block_size, 73);
  EXPECT_EQ(gpt.replicated, (std::vector<std::string>{"tokenizer"}));
  EXPECT_EQ(gpt.zero.buffers.sync, zero::BufferSync::broadcast);
  EXPECT_FALSE(gpt.gpt->tie_embeddings);
  EXPECT_TRUE(load_app_config(dir + "vqgpt_tiny.yaml", {"gpt.tie_embeddings=true"}, App::vqgpt)
                  .gpt->tie_embeddings);

  AppConfig o = load_app_config(dir + "vqtok_tiny.yaml",
                                {"train.lr=5e-4", "train.steps=20", "buffers.sync=none"});
  EXPECT_DOUBLE_EQ(o.train.lr, 5e-4);
  EXPECT_EQ(o.train.steps, 20);
  EXPECT_EQ(o.zero.buffers.sync, zero::BufferSync::none);
  EXPECT_FALSE(o.root.dump().empty());
}

TEST(Config, BufferPolicyLongestPrefixWins) {
  Node r = parse_yaml(
      "buffers:\n  sync: average\n  modules:\n    - {module: decoder, sync: broadcast}\n"
      "    - {module: decoder.time_res_stack.1, sync: none}\n");
  AppConfig c = parse_app_config(r);
  using zero::BufferSync;
  const zero::BuffersConfig& b = c.zero.buffers;
  EXPECT_EQ(b.sync_for("encoder.time_res_stack.0.norm1.running_mean"), BufferSync::average);
  EXPECT_EQ(b.sync_for("decoder.time_res_stack.0.norm1.running_mean"), BufferSync::broadcast);
  EXPECT_EQ(b.sync_for("decoder.time_res_stack.1.norm2.running_var"), BufferSync::none);
  EXPECT_EQ(b.sync_for("decoderx.w"), BufferSync::average);
}

// Each bad config and the message it must produce (every fragment must appear).
struct BadCase {
  const char* name;
  const char* yaml;
  std::vector<Override> overrides;
  std::vector<std::string> expect;
  App app = App::any;
};

const std::vector<BadCase> kBadConfigs = {
    {"unknown_key",
     "train:\n  steps: 10\n  stpes: 20\n",
     {},
     {"bad.yaml:3: train.stpes: unknown key; did you mean 'train.steps'?"}},
    {"unknown_top",
     "trian:\n  steps: 10\n",
     {},
     {"bad.yaml:1: trian: unknown key; did you mean 'train'?"}},
    // A section's key written at the top level is named with its section, not with the
    // nearest top-level key ('loss' for lr, 'replicated' for a ZeRO key).
    {"misplaced_train_key",
     "train:\n  steps: 10\nlr: 1.0e-3\n",
     {},
     {"bad.yaml:3: lr: unknown key here; it belongs in another section: did you mean "
      "'train.lr'?"}},
    {"misplaced_shared_key",  // every section that has it
     "seed: 3\n",
     {},
     {"did you mean 'data.seed' or 'train.seed'?"}},
    {"misplaced_zero_key",
     "stage3_max_live_parameters: 5\n",
     {},
     {"did you mean 'zero_optimization.stage3_max_live_parameters'?"}},
    {"wrong_type",
     "train:\n  steps: abc\n",
     {},
     {"bad.yaml:2: train.steps: expected an integer, got 'abc'"}},
    {"float_for_int",
     "train:\n  batch: 2.5\n",
     {},
     {"train.batch: expected an integer, got '2.5'"}},
    {"below_min",
     "train:\n  steps: 0\n",
     {},
     {"bad.yaml:2: train.steps: 0 is out of range: must be >= 1"}},
    {"above_max", "train:\n  lr: 20\n", {}, {"train.lr: 20 is out of range: must be in [0, 10]"}},
    {"bad_enum",
     "train:\n  schedule: cosin\n",
     {},
     {"bad.yaml:2: train.schedule: 'cosin' is not one of: constant, cosine, linear, step",
      "did you mean 'cosine'?"}},
    {"tf32_mode",
     "train:\n  tf32: true\n",
     {},
     {"bad.yaml:2: train.tf32: 'true' is not one of: conv, all, none"}},
    {"attention_kernel",
     "train:\n  attention: fast\n",
     {},
     {"bad.yaml:2: train.attention: 'fast' is not one of: auto, flash, math"}},
    {"cuda_graph_on_cpu",
     "train:\n  cuda_graph: true\n",
     {},
     {"bad.yaml:2: train.cuda_graph: CUDA graphs need device: cuda (the device is cpu)"}},
    {"cuda_graph_accumulates",
     "train:\n  device: cuda\n  gradient_accumulation_steps: 2\n  cuda_graph: true\n",
     {},
     {"train.cuda_graph: a graph holds one whole step: set gradient_accumulation_steps to 1"}},
    {"bool",
     "data:\n  shuffle: maybe\n",
     {},
     {"data.shuffle: expected true or false, got 'maybe'"}},
    {"list_expected", "model:\n  ch_mult: 4\n", {}, {"model.ch_mult: expected a list of integers"}},
    {"map_expected", "model: 5\n", {}, {"bad.yaml:1: model: expected a mapping"}},
    {"embed_ne_z",
     "model:\n  embed_dim: 8\n  z_channels: 4\n",
     {},
     {"bad.yaml:2: model.embed_dim: embed_dim (8) must equal z_channels (4)"}},
    {"groupnorm", "model:\n  ch: 48\n", {}, {"model.ch: must be a multiple of 32 (GroupNorm"}},
    {"temporal_pow2",
     "model:\n  temporal_downsample_factor: 3\n",
     {},
     {"model.temporal_downsample_factor: must be a power of two"}},
    {"attn_level",
     "model:\n  attn_resolutions: [5]\n",
     {},
     {"model.attn_resolutions: level 5 does not exist", "level indices, not pixels"}},
    {"height_multiple",
     "data:\n  height: 36\n",
     {},
     {"bad.yaml:2: data.height: height and width must be multiples of 8"}},
    {"frames_multiple",
     "data:\n  frames: 6\n",
     {},
     {"data.frames: frames (6) must be 1 (an image) or a multiple of"}},
    {"in_channels",
     "model:\n  in_channels: 1\n  out_channels: 1\n",
     {},
     {"bad.yaml:2: model.in_channels: in_channels (1) must be 3: synthetic data is RGB"}},
    {"out_channels",
     "model:\n  out_channels: 4\n",
     {},
     {"model.out_channels: out_channels (4) must equal in_channels (3)"}},
    {"npy_needs_path", "data:\n  kind: npy\n", {}, {"data.path: data.kind npy needs data.path"}},
    {"bad_fit", "data:\n  fit: squash\n", {}, {"data.fit", "crop", "stretch"}},
    {"synthetic_eval_path",
     "data:\n  eval_path: val.npy\n",
     {},
     {"data.eval_path: synthetic data holds out its eval clips already"}},
    {"betas_len", "train:\n  betas: [0.9]\n", {}, {"train.betas: expected two values"}},
    {"min_lr",
     "train:\n  lr: 0.1\n  min_lr: 0.2\n",
     {},
     {"train.min_lr: min_lr must not exceed lr"}},
    {"empty_no_weight_decay_pattern",
     "train:\n  no_weight_decay: [\"*.bias\", \"\"]\n",
     {},
     {"train.no_weight_decay: a pattern is empty"}},
    {"param_groups_not_a_list",
     "train:\n  param_groups: {params: [\"*.bias\"]}\n",
     {},
     {"train.param_groups: expected a list of {params: [name patterns], lr_scale: x, "
      "weight_decay: y}"}},
    {"param_group_without_params",
     "train:\n  param_groups:\n    - {lr_scale: 0.1}\n",
     {},
     {"bad.yaml:3: train.param_groups.0.params: each group needs params"}},
    {"param_group_unknown_key",
     "train:\n  param_groups:\n    - {params: [\"a.*\"], lr: 0.1}\n",
     {},
     {"train.param_groups.0.lr: unknown key"}},
    {"param_group_negative_decay",
     "train:\n  param_groups:\n    - {params: [\"a.*\"], weight_decay: -1}\n",
     {},
     {"train.param_groups.0.weight_decay: -1 is out of range"}},
    {"no_weight_decay_not_a_list",
     "train:\n  no_weight_decay: {bias: true}\n",
     {},
     {"train.no_weight_decay: expected a list"}},
    {"buffer_sync",
     "buffers:\n  sync: avg\n",
     {},
     {"buffers.sync: 'avg' is not one of: broadcast, average, none", "did you mean 'average'?"}},
    {"buffer_module_key",
     "buffers:\n  modules:\n    - {modul: encoder, sync: none}\n",
     {},
     {"buffers.modules.0.modul: unknown key; did you mean 'buffers.modules.0.module'?"}},
    {"duplicate",
     "train:\n  steps: 1\n  steps: 2\n",
     {},
     {"bad.yaml:3: train.steps: duplicate key"}},
    {"parse_error", "train: [1, 2\n", {}, {"bad.yaml:", "YAML parse error"}},
    {"tab_indent",
     "train:\n  steps: 2\n\tlr: 0.1\n",
     {},
     {"bad.yaml:3: a tab in the indentation; YAML indents with spaces only"}},
    {"zero_not_map", "zero_optimization: 3\n", {}, {"zero_optimization: expected a mapping"}},
    {"empty_file", "", {}, {"bad.yaml: the config is empty", "configs/vqtok_tiny.yaml"}},
    {"eval_without_samples",
     "data:\n  eval_samples: 0\ntrain:\n  eval_every: 10\n",
     {},
     {"bad.yaml:2: data.eval_samples: eval_samples is 0 but train.eval_every is 10"}},
    {"two_documents",
     "train:\n  steps: 10\n---\ntrain:\n  steps: 20\n",
     {},
     {"bad.yaml:4: a second YAML document (after '---')"}},
    {"comments_only",
     "# nothing yet\n\n  # still nothing\n",
     {},
     {"bad.yaml: the config is empty"}},
    {"empty_value",
     "train:\n  steps: 10\n  lr:\n",
     {},
     {"bad.yaml:3: train.lr: the key has no value; give one (lr: ...) or delete the line"}},
    {"empty_section",
     "loss:\ntrain:\n  steps: 3\n",
     {},
     {"bad.yaml:1: loss: the key has no value"}},
    {"empty_nested_value",
     "zero_optimization:\n  stage: 3\n  reduce_bucket_size:\n",
     {},
     {"bad.yaml:3: zero_optimization.reduce_bucket_size: the key has no value"}},
    {"zero_unknown",
     "zero_optimization:\n  stage3_prefetch_bucket: 5\n",
     {},
     {"bad.yaml:2: zero_optimization.stage3_prefetch_bucket: unknown key; did you mean "
      "'zero_optimization.stage3_prefetch_bucket_size'?"}},
    {"zero_stage",
     "zero_optimization:\n  stage: 2\n",
     {},
     {"zero_optimization.stage: 2 is out of range"}},
    {"zero_offload",
     "zero_optimization:\n  offload_param: {device: nvme}\n",
     {},
     {"bad.yaml:2: zero_optimization.offload_param: not supported by zt (parameters stay on the "
      "training device)"}},
    {"offload_optimizer_nvme",
     "zero_optimization:\n  offload_optimizer:\n    device: nvme\n",
     {},
     {"bad.yaml:3: zero_optimization.offload_optimizer.device: device: nvme is not supported by "
      "zt (optimizer state offloads to host memory only); use device: cpu"}},
    {"offload_optimizer_device",
     "zero_optimization:\n  offload_optimizer: {device: gpu}\n",
     {},
     {"zero_optimization.offload_optimizer.device: unknown offload device 'gpu'; use cpu or none"}},
    {"offload_optimizer_unknown",
     "zero_optimization:\n  offload_optimizer:\n    device: cpu\n    pin_memroy: true\n",
     {},
     {"bad.yaml:4: zero_optimization.offload_optimizer.pin_memroy: unknown key; did you mean "
      "'zero_optimization.offload_optimizer.pin_memory'?"}},
    {"offload_optimizer_ratio",
     "zero_optimization:\n  offload_optimizer: {device: cpu, ratio: 0.5}\n",
     {},
     {"zero_optimization.offload_optimizer.ratio: partial offload is not supported by zt"}},
    {"bf16_unknown",
     "bf16:\n  enable: true\n",
     {},
     {"bad.yaml:2: bf16.enable: unknown key; did you mean 'bf16.enabled'?"}},
    {"fp16_unknown",
     "fp16:\n  enabled: true\n  loss_scale_windw: 10\n",
     {},
     {"bad.yaml:3: fp16.loss_scale_windw: unknown key; did you mean 'fp16.loss_scale_window'?"}},
    {"fp16_bad_value",
     "fp16:\n  loss_scale_window: 0\n",
     {},
     {"fp16.loss_scale_window: 0 is out of range"}},
    {"both_precisions",
     "bf16: {enabled: true}\nfp16: {enabled: true}\n",
     {},
     {"fp16.enabled: bf16 and fp16 cannot both be enabled"}},
    {"dtype_vs_bf16",
     "train:\n  dtype: f16\nbf16:\n  enabled: true\n",
     {},
     {"bad.yaml:2: train.dtype: train.dtype is f16 but bf16.enabled is true; they must agree: "
      "set train.dtype: bf16"}},
    {"dtype_f32_vs_fp16",
     "train:\n  dtype: f32\nfp16:\n  enabled: true\n",
     {},
     {"train.dtype: train.dtype is f32 but fp16.enabled is true"}},
    {"dtype_unknown",
     "train:\n  dtype: fp8\n",
     {},
     {"train.dtype: 'fp8' is not one of: f32, bf16, f16"}},
    {"set_unknown",
     "train:\n  steps: 10\n",
     {"train.stpes=5"},
     {"--set train.stpes=5: train.stpes: unknown key; did you mean 'train.steps'?"}},
    {"set_wrong_type",
     "train:\n  steps: 10\n",
     {"train.steps=abc"},
     {"--set train.steps=abc: train.steps: expected an integer, got 'abc'"}},
    {"set_unknown_section",
     "train:\n  steps: 10\n",
     {"trainn.steps=5"},
     {"trainn: unknown key; did you mean 'train'?"}},
    {"gpt_in_vqtok",
     "gpt:\n  n_layer: 2\n",
     {},
     {"bad.yaml:1: gpt: the gpt section is for vqgpt"},
     App::vqtok},
    {"gpt_heads",
     "gpt:\n  n_head: 4\n  n_embd: 130\n  tokenizer_checkpoint: x\n",
     {},
     {"gpt.n_embd: n_embd (130) must be a multiple of n_head (4)"},
     App::vqgpt},
    {"gpt_needs_tokenizer", "gpt:\n  n_layer: 2\n", {}, {"gpt.tokenizer_checkpoint"}, App::vqgpt},
    {"gpt_block",
     "gpt:\n  block_size: 8\n  tokenizer_checkpoint: x\n",
     {},
     {"gpt.block_size: block_size (8) must hold BOS, a clip's codes and an end-of-row token per "
      "row (21)"},
     App::vqgpt},
};

void PrintTo(const BadCase& c, std::ostream* os) {
  *os << c.name;
}

class BadConfig : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfig, FailsWithMessage) {
  const BadCase& c = GetParam();
  const std::string path = write_temp(c.name, "bad.yaml", c.yaml);
  const std::string msg = error_of([&] { load_app_config(path, c.overrides, c.app); });
  for (const auto& frag : c.expect) EXPECT_NE(msg.find(frag), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Table, BadConfig, ::testing::ValuesIn(kBadConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Config, VqtokOnlyTrainingKeysAreRefusedByVqgpt) {
  const std::string err = test::error_of([] {
    parse_app_config(parse_yaml("train:\n  codebook_restart_every: 10\n", "gpt.yaml"), App::vqgpt);
  });
  EXPECT_NE(err.find("gpt.yaml:2: train.codebook_restart_every: restarts codes of a tokenizer in "
                     "training (vqtok)"),
            std::string::npos)
      << err;
}

TEST(Config, WeightDecayExclusionsAreRead) {
  AppConfig d = parse_app_config(parse_yaml("train:\n  steps: 2\n"));
  EXPECT_TRUE(d.train.weight_decay_1d) << "every parameter decays by default, as in PyTorch";
  EXPECT_TRUE(d.train.no_weight_decay.empty());
  AppConfig c =
      parse_app_config(parse_yaml("train:\n  weight_decay: 0.1\n  weight_decay_1d: false\n  "
                                  "no_weight_decay: [\"tok_emb.*\"]\n"));
  EXPECT_FALSE(c.train.weight_decay_1d);
  EXPECT_EQ(c.train.no_weight_decay, std::vector<std::string>{"tok_emb.*"});
  EXPECT_TRUE(c.train.param_groups.empty());
  AppConfig g = parse_app_config(
      parse_yaml("train:\n  param_groups:\n    - {params: [\"gpt.wte.*\", \"*.bias\"], "
                 "lr_scale: 0.1}\n    - {params: [\"gpt.head.*\"], weight_decay: 0.0}\n"));
  ASSERT_EQ(g.train.param_groups.size(), 2u);
  EXPECT_EQ(g.train.param_groups[0].params, (std::vector<std::string>{"gpt.wte.*", "*.bias"}));
  EXPECT_EQ(g.train.param_groups[0].lr_scale, 0.1);
  EXPECT_FALSE(g.train.param_groups[0].weight_decay.has_value()) << "as outside any group";
  EXPECT_EQ(g.train.param_groups[1].lr_scale, 1.0);
  EXPECT_EQ(g.train.param_groups[1].weight_decay, 0.0);
}

TEST(Config, MixedPrecisionSectionsReachTheEngineConfig) {
  // bf16 section.
  AppConfig b = parse_app_config(parse_yaml("bf16:\n  enabled: true\n"));
  EXPECT_TRUE(b.zero.precision.bf16);
  EXPECT_EQ(b.zero.precision.dtype(), DType::bf16);
  EXPECT_EQ(b.train.dtype, "bf16");
  // fp16 section with every key.
  AppConfig f =
      parse_app_config(parse_yaml("fp16: {enabled: true, loss_scale: 0, initial_scale_power: 12, "
                                  "loss_scale_window: 50, hysteresis: 3, min_loss_scale: 2}\n"));
  EXPECT_TRUE(f.zero.precision.fp16);
  EXPECT_EQ(f.zero.precision.initial_scale_power, 12);
  EXPECT_EQ(f.zero.precision.loss_scale_window, 50);
  EXPECT_EQ(f.zero.precision.hysteresis, 3);
  EXPECT_DOUBLE_EQ(f.zero.precision.min_loss_scale, 2.0);
  EXPECT_EQ(f.train.dtype, "f16");
  // train.dtype alone is the same as enabling the section (fp16 with dynamic defaults).
  AppConfig d = parse_app_config(parse_yaml("train:\n  dtype: f16\n"));
  EXPECT_TRUE(d.zero.precision.fp16);
  EXPECT_FALSE(d.zero.precision.bf16);
  EXPECT_EQ(d.zero.precision.loss_scale, 0.0);
  EXPECT_EQ(d.zero.precision.initial_scale_power, 16);
  AppConfig db = parse_app_config(parse_yaml("train:\n  dtype: bf16\nbf16:\n  enabled: true\n"));
  EXPECT_TRUE(db.zero.precision.bf16);
  // Neither: f32, and an explicit `enabled: false` changes nothing.
  AppConfig n = parse_app_config(parse_yaml("bf16:\n  enabled: false\ntrain:\n  steps: 2\n"));
  EXPECT_EQ(n.zero.precision.dtype(), DType::f32);
  EXPECT_EQ(n.train.dtype, "f32");
  // The train keys DeepSpeed keeps at the top level reach the engine too.
  AppConfig t = parse_app_config(
      parse_yaml("train:\n  gradient_clipping: 0.5\n  gradient_accumulation_steps: 3\n"));
  EXPECT_DOUBLE_EQ(t.zero.gradient_clipping, 0.5);
  EXPECT_EQ(t.zero.gradient_accumulation_steps, 3);
}

TEST(Config, OffloadOptimizerReachesTheEngineConfig) {
  AppConfig off = parse_app_config(parse_yaml("train:\n  steps: 2\n"));
  EXPECT_FALSE(off.zero.offload_optimizer.enabled());
  AppConfig none = parse_app_config(
      parse_yaml("zero_optimization:\n  offload_optimizer: {device: none, pin_memory: true}\n"));
  EXPECT_FALSE(none.zero.offload_optimizer.enabled());
  AppConfig cpu = parse_app_config(parse_yaml(
      "zero_optimization:\n  offload_optimizer:\n    device: cpu\n    pin_memory: true\n"));
  EXPECT_TRUE(cpu.zero.offload_optimizer.enabled());
  EXPECT_EQ(cpu.zero.offload_optimizer.device, zero::OffloadDevice::kCpu);
  EXPECT_TRUE(cpu.zero.offload_optimizer.pin_memory);
  EXPECT_TRUE(cpu.warnings.empty());
  AppConfig pageable =
      parse_app_config(parse_yaml("zero_optimization:\n  offload_optimizer: {device: cpu}\n"));
  EXPECT_TRUE(pageable.zero.offload_optimizer.enabled());
  EXPECT_FALSE(pageable.zero.offload_optimizer.pin_memory);
  // DeepSpeed's NVMe tuning keys are accepted with a located note.
  AppConfig nvme_keys = parse_app_config(parse_yaml(
      "zero_optimization:\n  offload_optimizer: {device: cpu, buffer_count: 4}\n", "o.yaml"));
  ASSERT_EQ(nvme_keys.warnings.size(), 1u);
  EXPECT_NE(nvme_keys.warnings[0].find(
                "o.yaml:2: zero_optimization.offload_optimizer.buffer_count: has no effect"),
            std::string::npos)
      << nvme_keys.warnings[0];
}

TEST(Config, KeysWithoutEffectWarnWithTheirLocation) {
  AppConfig quiet =
      parse_app_config(parse_yaml("zero_optimization:\n  contiguous_gradients: true\n"
                                  "  stage3_gather_16bit_weights_on_model_save: false\n",
                                  "w.yaml"));
  EXPECT_TRUE(quiet.warnings.empty()) << "zt does what these values ask";
  AppConfig c =
      parse_app_config(parse_yaml("zero_optimization:\n  contiguous_gradients: false\n"
                                  "  stage3_gather_16bit_weights_on_model_save: true\n",
                                  "w.yaml"));
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_NE(c.warnings[0].find("w.yaml:2: zero_optimization.contiguous_gradients: false has no "
                               "effect in zt"),
            std::string::npos)
      << c.warnings[0];
  EXPECT_NE(c.warnings[1].find("w.yaml:3: zero_optimization."
                               "stage3_gather_16bit_weights_on_model_save: true has no effect"),
            std::string::npos)
      << c.warnings[1];
}

TEST(Config, Tf32DefaultsToConvolutionsOnly) {
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  steps: 3\n"), App::vqtok).train.tf32, "conv");
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  tf32: all\n"), App::vqtok).train.tf32, "all");
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  tf32: none\n"), App::vqtok).train.tf32, "none");
}

TEST(Config, AttentionKernelIsLeftToTheProcessUnlessSet) {
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  steps: 3\n"), App::vqtok).train.attention, "");
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  attention: math\n"), App::vqtok).train.attention,
            "math");
}

TEST(Config, MissingFileNamesIt) {
  const std::string msg = error_of([] { load_yaml_file("/nonexistent/cfg.yaml"); });
  EXPECT_NE(msg.find("cannot open config file '/nonexistent/cfg.yaml'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace zt::config
