// Config loading: the tree keeps file/line/path, Section reads strictly, --set
// overrides any key, and the shipped configs load. The table of bad configs, each failing
// with the message a user needs, is in test_config_errors.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "common/test_util.h"
#include "configs/app_config.h"
#include "configs/config.h"
#include "core/dtype.h"
#include "core/error.h"

namespace zt::config {
namespace {

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
  for (const char* unnamed : {"train.=3", ".lr=3", "train..lr=3"})
    EXPECT_NE(error_of([&] { apply_override(r, unnamed); }).find("empty component in key path"),
              std::string::npos)
        << unnamed;
  // YAML would drop everything from a '#' after a blank (a comment): on a command line that
  // is a value cut short without a word, so it is refused; quoted, or without the blank, the
  // '#' is part of the value.
  for (const char* cut : {"output_dir=/tmp/run #2", "output_dir=#2", "model.ch_mult=[1, 2]\t# x"})
    EXPECT_NE(error_of([&] { apply_override(r, cut); }).find("starts a YAML comment"),
              std::string::npos)
        << cut;
  apply_override(r, "output_dir='/tmp/run #2'");
  EXPECT_EQ(r["output_dir"].as_string(), "/tmp/run #2");
  apply_override(r, "output_dir=/tmp/run#2");
  EXPECT_EQ(r["output_dir"].as_string(), "/tmp/run#2");
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

// data.prefetch 0 makes each batch when the step asks for it (no background thread), as
// the loader allows; a negative count is refused.
TEST(Config, PrefetchZeroReadsInTheStep) {
  EXPECT_EQ(parse_app_config(parse_yaml("data: {prefetch: 0}\n"), App::vqtok).data.prefetch, 0);
  EXPECT_NE(error_of([&] {
              parse_app_config(parse_yaml("data: {prefetch: -1}\n", "p.yaml"), App::vqtok);
            }).find("p.yaml:1: data.prefetch"),
            std::string::npos);
}

// data.timeout: seconds a step waits for its batch, 0 (no limit) by default.
TEST(Config, DataTimeoutIsSeconds) {
  EXPECT_EQ(parse_app_config(parse_yaml("data: {prefetch: 1}\n"), App::vqtok).data.timeout, 0.0);
  EXPECT_EQ(parse_app_config(parse_yaml("data: {timeout: 2.5}\n"), App::vqtok).data.timeout, 2.5);
}

// train.eval_batches: 0 scores the whole eval split, as vqgpt eval's README says (and as
// scored_eval_items and begin_eval_pass read it); negative counts stay errors.
TEST(Config, EvalBatchesZeroScoresTheWholeSplit) {
  EXPECT_EQ(
      parse_app_config(parse_yaml("train: {eval_batches: 0}\n"), App::vqtok).train.eval_batches, 0);
  EXPECT_EQ(parse_app_config(parse_yaml("train: {eval_batches: 0}\nreplicated: [tokenizer]\n"),
                             App::vqgpt)
                .train.eval_batches,
            0);
  EXPECT_NE(error_of([&] {
              parse_app_config(parse_yaml("train: {eval_batches: -1}\n", "e.yaml"), App::vqtok);
            }).find("e.yaml:1: train.eval_batches: -1 is out of range"),
            std::string::npos);
}

// Each zero_optimization size key reaches its own field of the engine's config.
TEST(Config, ZeroOptimizationSizesReachTheirOwnFields) {
  const AppConfig c = parse_app_config(
      parse_yaml("zero_optimization: {stage3_prefetch_bucket_size: 11, "
                 "stage3_param_persistence_threshold: 12, stage3_max_live_parameters: 13, "
                 "stage3_max_reuse_distance: 14, reduce_bucket_size: 15}\n"),
      App::vqtok);
  EXPECT_EQ(c.zero.stage3_prefetch_bucket_size, 11);
  EXPECT_EQ(c.zero.stage3_param_persistence_threshold, 12);
  EXPECT_EQ(c.zero.stage3_max_live_parameters, 13);
  EXPECT_EQ(c.zero.stage3_max_reuse_distance, 14);
  EXPECT_EQ(c.zero.reduce_bucket_size, 15);
}

// A bare `optimizer: sgd` is torch.optim.SGD(params, lr): no momentum, no dampening, no
// Nesterov, as a DeepSpeed JSON's SGD without those params.
TEST(Config, SgdDefaultsToPlainSgdAsTorch) {
  const TrainConfig t =
      parse_app_config(parse_yaml("train: {optimizer: sgd, lr: 0.1}\n"), App::vqtok).train;
  EXPECT_EQ(t.momentum, 0.0);
  EXPECT_EQ(t.dampening, 0.0);
  EXPECT_FALSE(t.nesterov);
  EXPECT_EQ(parse_app_config(parse_yaml("train: {optimizer: sgd, momentum: 0.9}\n"), App::vqtok)
                .train.momentum,
            0.9);
}

TEST(Config, TheStepScheduleNeedsAPositiveGamma) {
  const std::string msg = error_of([] {
    parse_app_config(parse_yaml("train: {schedule: step, gamma: 0}\n", "g.yaml"), App::vqtok);
  });
  EXPECT_NE(msg.find("g.yaml:1: train.gamma: must be in (0, 1], got 0"), std::string::npos) << msg;
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
  // The Emu3 (MoVQGAN) recipe's VQ weighting: 0.25 x (codebook + 4 x commitment).
  EXPECT_EQ(big.loss.vq, 0.25);
  EXPECT_EQ(big.loss.commitment, 4.0);
  EXPECT_TRUE(big.warnings.empty()) << big.warnings[0];
  // A DeepSpeed key that changes nothing here is accepted with a warning naming where.
  const std::string gather16 = "zero_optimization.stage3_gather_16bit_weights_on_model_save";
  AppConfig warned =
      load_app_config(dir + "emu3_vision_tokenizer.yaml",
                      {{gather16 + "=true", "--set " + gather16 + "=true"}}, App::vqtok);
  ASSERT_EQ(warned.warnings.size(), 1u);
  EXPECT_NE(warned.warnings[0].find(gather16 + ": true has no effect in zt"), std::string::npos)
      << warned.warnings[0];
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
  EXPECT_TRUE(gpt.warnings.empty()) << gpt.warnings.front();
  // The frozen tokenizer's dropout and BatchNorm sync would do nothing: said, where set on.
  const AppConfig frozen =
      load_app_config(dir + "vqgpt_tiny.yaml",
                      {"model.dropout=0.1", "zero_optimization.sync_batchnorm=true"}, App::vqgpt);
  ASSERT_EQ(frozen.warnings.size(), 2u);
  EXPECT_NE(frozen.warnings[0].find("model.dropout has no effect in vqgpt train"),
            std::string::npos)
      << frozen.warnings[0];
  EXPECT_NE(frozen.warnings[1].find("zero_optimization.sync_batchnorm has no effect in vqgpt"),
            std::string::npos)
      << frozen.warnings[1];

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

// fp16's loss-scaling keys are read (as DeepSpeed reads them) but do nothing where fp16
// is off: each warns, naming its line and the dtype the run trains in.
TEST(Config, Fp16KeysWithoutFp16Warn) {
  AppConfig off = parse_app_config(
      parse_yaml("fp16:\n  loss_scale: 128\n  initial_scale_power: 8\n", "h.yaml"));
  ASSERT_EQ(off.warnings.size(), 2u);
  EXPECT_EQ(off.warnings[0],
            "h.yaml:2: fp16.loss_scale has no effect: fp16 is not enabled (the "
            "run trains in f32)");
  EXPECT_EQ(off.warnings[1].rfind("h.yaml:3: fp16.initial_scale_power has no effect", 0), 0u);
  AppConfig bf16 = parse_app_config(
      parse_yaml("bf16:\n  enabled: true\nfp16:\n  enabled: false\n  hysteresis: 4\n", "b.yaml"));
  ASSERT_EQ(bf16.warnings.size(), 1u);
  EXPECT_NE(bf16.warnings[0].find("(the run trains in bf16)"), std::string::npos);
  for (const char* on : {"fp16:\n  enabled: true\n  loss_scale: 128\n",
                         "train:\n  dtype: f16\nfp16:\n  loss_scale: 128\n"})
    EXPECT_TRUE(parse_app_config(parse_yaml(on, "on.yaml")).warnings.empty()) << on;
}

// data.resize and data.fit shape images only (an image folder's, or encode --input's): with
// synthetic or npy data they warn as data.on_bad_image does.
TEST(Config, ImageKeysWithoutImagesWarn) {
  for (const char* kind : {"synthetic", "npy"}) {
    const AppConfig c =
        parse_app_config(parse_yaml(std::string("data:\n  kind: ") + kind +
                                        "\n  path: /x.npy\n  resize: bilinear\n  fit: stretch\n",
                                    "i.yaml"));
    for (const char* key : {"i.yaml:4: data.resize", "i.yaml:5: data.fit"})
      EXPECT_EQ(std::count_if(c.warnings.begin(), c.warnings.end(),
                              [&](const std::string& w) {
                                return w.rfind(std::string(key) + " has no effect with data.kind " +
                                                   kind + " for training and eval",
                                               0) == 0;
                              }),
                1)
          << kind << ": " << key;
  }
  EXPECT_TRUE(parse_app_config(parse_yaml("data:\n  kind: image_folder\n  path: /x\n  resize: "
                                          "bilinear\n  fit: stretch\n"))
                  .warnings.empty());
}

// Keys the rest of the config leaves without effect (another optimizer's, schedule's or
// data kind's) warn, naming where they are set; the keys that apply do not. Those only
// training reads are kept apart, for the commands that train.
TEST(Config, KeysOfAnotherOptimizerScheduleOrDataKindWarn) {
  AppConfig c = parse_app_config(
      parse_yaml("train:\n  optimizer: adamw\n  momentum: 0.8\n  schedule: cosine\n"
                 "  step_size: 3\n  gamma: 0.5\n  trace_steps: 4\n  tf32: all\ndata:\n"
                 "  path: /x\n  on_bad_image: skip\n",
                 "k.yaml"));
  const std::vector<std::string> want = {
      "k.yaml:8: train.tf32 has no effect on device cpu (it sets the GPU's libraries)",
      "k.yaml:10: data.path has no effect with data.kind synthetic",
      "k.yaml:11: data.on_bad_image has no effect with data.kind synthetic for training and "
      "eval (it is image_folder's; vqtok encode --input with a folder of images reads it)"};
  ASSERT_EQ(c.warnings.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(c.warnings[i].rfind(want[i], 0), 0u) << c.warnings[i];
  const std::vector<std::string> want_training = {
      "k.yaml:3: train.momentum has no effect with optimizer adamw (it is sgd's)",
      "k.yaml:5: train.step_size has no effect with schedule cosine (it is schedule step's)",
      "k.yaml:6: train.gamma has no effect with schedule cosine",
      "k.yaml:7: train.trace_steps has no effect without train.trace"};
  ASSERT_EQ(c.training_warnings.size(), want_training.size());
  for (size_t i = 0; i < want_training.size(); ++i)
    EXPECT_EQ(c.training_warnings[i].rfind(want_training[i], 0), 0u) << c.training_warnings[i];
  AppConfig folder = parse_app_config(
      parse_yaml("data:\n  kind: image_folder\n  path: /x\n  on_bad_image: skip\n", "f.yaml"));
  EXPECT_TRUE(folder.warnings.empty());
  EXPECT_EQ(folder.data.on_bad_image, data::OnBadImage::skip);
  AppConfig counted = parse_app_config(
      parse_yaml("data:\n  kind: npy\n  path: /x.npy\n  num_samples: 5\n", "n.yaml"));
  ASSERT_EQ(counted.warnings.size(), 1u);
  EXPECT_EQ(counted.warnings[0].rfind(
                "n.yaml:4: data.num_samples has no effect with data.kind image_folder or npy", 0),
            0u)
      << counted.warnings[0];
  AppConfig sgd = parse_app_config(
      parse_yaml("train:\n  optimizer: sgd\n  momentum: 0.8\n  betas: [0.9, 0.99]\n"
                 "  schedule: constant\n  min_lr: 0.0\n",
                 "s.yaml"));
  EXPECT_TRUE(sgd.warnings.empty()) << sgd.warnings[0];
  ASSERT_EQ(sgd.training_warnings.size(), 2u);
  EXPECT_EQ(
      sgd.training_warnings[0].rfind("s.yaml:4: train.betas has no effect with optimizer sgd", 0),
      0u);
  EXPECT_EQ(sgd.training_warnings[1].rfind(
                "s.yaml:6: train.min_lr has no effect with schedule constant", 0),
            0u);
  AppConfig cut = parse_app_config(parse_yaml("train:\n  steps: 4\n  warmup: 20\n", "c.yaml"));
  ASSERT_EQ(cut.training_warnings.size(), 1u);
  EXPECT_EQ(
      cut.training_warnings[0].rfind(
          "c.yaml:3: train.warmup has no effect beyond train.steps (4): the warmup is cut", 0),
      0u)
      << cut.training_warnings[0];
  const AppConfig stepped = parse_app_config(
      parse_yaml("train:\n  schedule: step\n  step_size: 3\n  trace: t.json\n  trace_steps: 4\n"));
  EXPECT_TRUE(stepped.warnings.empty() && stepped.training_warnings.empty());
}

// Two overrides of one key: the later wins and a warning names both (a shortcut such as
// --steps is applied after every --set). The same value twice says nothing.
TEST(Config, AnOverrideReplacedByALaterOneWarns) {
  const std::string tiny = std::string(ZT_SOURCE_DIR) + "/configs/vqtok_tiny.yaml";
  AppConfig c = load_app_config(
      tiny, {{"train.steps=40", "--set train.steps=40"}, {"train.steps=80", "--steps 80"}},
      App::vqtok);
  EXPECT_EQ(c.train.steps, 80);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0], "--steps 80 replaces --set train.steps=40 (train.steps: 80)");
  EXPECT_TRUE(load_app_config(
                  tiny,
                  {{"train.steps=80", "--set train.steps=80"}, {"train.steps=80", "--steps 80"}},
                  App::vqtok)
                  .warnings.empty());
}

// A mapping set whole replaces the file's (YAML's rule): a warning names the keys the
// file gave it, which go back to their defaults. Setting one key, or all of them, says
// nothing.
TEST(Config, AnOverrideOfAWholeSectionNamesTheKeysItDrops) {
  const std::string path =
      test::write_temp_file("zt_config_test", "whole", "w.yaml",
                            "train:\n  steps: 10\n  lr: 1.0e-3\n  batch: 4\nloss:\n  l1: 0.5\n");
  AppConfig c =
      load_app_config(path, {{"train={steps: 2, batch: 4}", "--set train={steps: 2, batch: 4}"}});
  EXPECT_EQ(c.train.steps, 2);
  EXPECT_EQ(c.train.lr, TrainConfig{}.lr) << "YAML's rule: the section is replaced";
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0], "--set train={steps: 2, batch: 4} sets all of train: the keys " + path +
                               ":1 gives it (lr) go back to their defaults (to change one "
                               "key, --set train.<key>=...)");
  EXPECT_TRUE(load_app_config(path, {{"train.lr=2e-3", "--set train.lr=2e-3"}}).warnings.empty());
  EXPECT_TRUE(
      load_app_config(path, {{"loss={l1: 0.25}", "--set loss={l1: 0.25}"}}).warnings.empty());
}

TEST(Config, Tf32DefaultsToConvolutionsOnly) {
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  steps: 3\n"), App::vqtok).train.tf32, "conv");
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  tf32: all\n"), App::vqtok).train.tf32, "all");
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  tf32: none\n"), App::vqtok).train.tf32, "none");
}

TEST(Config, CudnnBenchmarkIsLeftToTheProcessUnlessSetAndDeterministicByDefault) {
  const TrainConfig d = parse_app_config(parse_yaml("train:\n  steps: 3\n"), App::vqtok).train;
  EXPECT_FALSE(d.cudnn_benchmark.has_value());
  EXPECT_TRUE(d.cudnn_deterministic);
  const TrainConfig on =
      parse_app_config(
          parse_yaml("train:\n  cudnn_benchmark: true\n  cudnn_deterministic: false\n"), App::vqtok)
          .train;
  EXPECT_EQ(on.cudnn_benchmark, std::optional<bool>(true));
  EXPECT_FALSE(on.cudnn_deterministic);
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  cudnn_benchmark: false\n"), App::vqtok)
                .train.cudnn_benchmark,
            std::optional<bool>(false));
}

TEST(Config, GemmBenchmarkIsLeftToTheProcessUnlessSet) {
  EXPECT_FALSE(parse_app_config(parse_yaml("train:\n  steps: 3\n"), App::vqtok)
                   .train.gemm_benchmark.has_value());
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  gemm_benchmark: true\n"), App::vqtok)
                .train.gemm_benchmark,
            std::optional<bool>(true));
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  gemm_benchmark: false\n"), App::vqtok)
                .train.gemm_benchmark,
            std::optional<bool>(false));
}

TEST(Config, AttentionKernelIsLeftToTheProcessUnlessSet) {
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  steps: 3\n"), App::vqtok).train.attention, "");
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  attention: math\n"), App::vqtok).train.attention,
            "math");
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  steps: 3\n"), App::vqtok).train.flash_backward,
            "");
  EXPECT_EQ(parse_app_config(parse_yaml("train:\n  flash_backward: atomic\n"), App::vqtok)
                .train.flash_backward,
            "atomic");
}

TEST(Config, MissingFileNamesIt) {
  const std::string msg = error_of([] { load_yaml_file("/nonexistent/cfg.yaml"); });
  EXPECT_NE(msg.find("cannot open config file '/nonexistent/cfg.yaml'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace zt::config
