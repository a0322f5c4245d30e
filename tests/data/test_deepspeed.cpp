// DeepSpeed JSON configs (configs/deepspeed.h): a ZeRO-3 config as DeepSpeed users write
// it maps onto TrainConfig and zero::Config key by key; YAML values it replaces are
// reported; train_batch_size is checked against the world size; and keys zt does not
// implement are errors naming the key path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/test_util.h"
#include "configs/app_config.h"
#include "configs/deepspeed.h"
#include "core/dtype.h"
#include "core/error.h"

namespace zt::config {
namespace {

std::string write_temp(const std::string& sub, const std::string& name, const std::string& text) {
  return test::write_temp_file("zt_deepspeed_test", sub, name, text);
}

using test::error_of;

// The model/data/run YAML the DeepSpeed config is combined with.
AppConfig with_deepspeed(const std::string& sub, const std::string& json,
                         const std::string& yaml = "train:\n  steps: 10\n",
                         const std::vector<Override>& overrides = {}) {
  const std::string ds = write_temp(sub, "ds_config.json", json);
  const std::string y = write_temp(sub, "run.yaml", yaml + "deepspeed_config: " + ds + "\n");
  return load_app_config(y, overrides);
}

const char* kZero3 = R"({
  "train_batch_size": 16,
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 4,
  "gradient_clipping": 1.0,
  "steps_per_print": 5,
  "optimizer": {
    "type": "AdamW",
    "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
  },
  "scheduler": {
    "type": "WarmupCosineLR",
    "params": {"total_num_steps": 200, "warmup_num_steps": 20, "warmup_type": "linear",
               "warmup_min_ratio": 0, "cos_min_ratio": 0.1}
  },
  "bf16": {"enabled": true},
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": true,
    "contiguous_gradients": true,
    "reduce_bucket_size": 5e5,
    "stage3_prefetch_bucket_size": 4.5e5,
    "stage3_param_persistence_threshold": 1e4,
    "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9,
    "stage3_gather_16bit_weights_on_model_save": false,
    "offload_optimizer": {"device": "none"},
    "offload_param": {"device": "none"}
  },
  "wall_clock_breakdown": false
})";

TEST(DeepSpeed, Zero3ConfigMapsKeyByKey) {
  const AppConfig c = with_deepspeed("zero3", kZero3);
  EXPECT_EQ(c.train.batch, 2);
  EXPECT_EQ(c.train.gradient_accumulation_steps, 4);
  EXPECT_EQ(c.train_batch_size, 16);
  EXPECT_DOUBLE_EQ(c.train.gradient_clipping, 1.0);
  EXPECT_EQ(c.train.log_every, 5);
  EXPECT_EQ(c.train.optimizer, Optimizer::adamw);
  EXPECT_DOUBLE_EQ(c.train.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.train.betas[1], 0.95);
  EXPECT_DOUBLE_EQ(c.train.weight_decay, 0.1);
  EXPECT_EQ(c.train.schedule, Schedule::cosine);
  EXPECT_EQ(c.train.steps, 200);
  EXPECT_EQ(c.train.warmup, 20);
  EXPECT_DOUBLE_EQ(c.train.min_lr, 3e-5);
  EXPECT_EQ(c.train.dtype, "bf16");
  EXPECT_TRUE(c.zero.precision.bf16);
  EXPECT_EQ(c.zero.reduce_bucket_size, 500000);
  EXPECT_EQ(c.zero.stage3_prefetch_bucket_size, 450000);
  EXPECT_EQ(c.zero.stage3_param_persistence_threshold, 10000);
  EXPECT_DOUBLE_EQ(c.zero.gradient_clipping, 1.0);
  EXPECT_EQ(c.zero.gradient_accumulation_steps, 4);
  // Only the YAML's train.steps (10) was replaced; it is reported with both locations.
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_NE(c.warnings[0].find("wall_clock_breakdown: has no effect in zt"), std::string::npos);
  EXPECT_NE(c.warnings[1].find("scheduler.params.total_num_steps (200) replaces train.steps (10) "
                               "from "),
            std::string::npos)
      << c.warnings[1];
  EXPECT_NE(c.warnings[1].find("run.yaml:2"), std::string::npos) << c.warnings[1];
  // A value the scheduler's type implies is named by the type.
  const AppConfig decay =
      with_deepspeed("implied",
                     R"({"scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 20,
                                                              "warmup_type": "linear"}}})",
                     "train:\n  steps: 20\n  min_lr: 1.0e-5\n");
  ASSERT_EQ(decay.warnings.size(), 1u);
  ASSERT_EQ(decay.training_warnings.size(), 1u);  // the scheduler's own: training's alone
  EXPECT_NE(decay.training_warnings[0].find("default warmup of 1000 updates"), std::string::npos)
      << decay.training_warnings[0];
  EXPECT_NE(decay.warnings[0].find(
                "scheduler.type WarmupDecayLR sets train.min_lr to 0, replacing 1e-05 from "),
            std::string::npos)
      << decay.warnings[0];
  // A value computed from the key's is named as computed: min_lr = cos_min_ratio x lr.
  const AppConfig cosine =
      with_deepspeed("derived",
                     R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "scheduler":
                         {"type": "WarmupCosineLR", "params": {"total_num_steps": 20,
                          "warmup_type": "linear", "cos_min_ratio": 0.1}}})",
                     "train:\n  steps: 20\n  lr: 0.01\n  min_lr: 1.0e-5\n");
  std::string said;
  for (const std::string& w : cosine.warnings) said += w + "\n";
  EXPECT_NE(said.find("scheduler.params.cos_min_ratio 0.1 sets train.min_lr to 0.001, replacing "
                      "1e-05 from "),
            std::string::npos)
      << said;
  // A value an earlier DeepSpeed key set (the optimizer's lr, then a WarmupLR's default
  // peak) is named where the JSON set it, not at the YAML line it had replaced.
  const AppConfig chained =
      with_deepspeed("chained",
                     R"({"optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
          "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10,
                                                     "warmup_type": "linear"}}})",
                     "train:\n  steps: 20\n  lr: 1.0e-3\n");
  said.clear();
  for (const std::string& w : chained.warnings) said += w + "\n";
  EXPECT_NE(said.find("optimizer.params.lr (0.0003) replaces train.lr (0.001) from "),
            std::string::npos)
      << said;
  const size_t at = said.find("scheduler.type WarmupLR sets train.lr to 0.001, replacing 0.0003");
  ASSERT_NE(at, std::string::npos) << said;
  EXPECT_TRUE(said.substr(at, said.find('\n', at) - at).ends_with("chained/ds_config.json:1"))
      << said;
  EXPECT_DOUBLE_EQ(chained.train.lr, 1e-3);
  // A value a command-line shortcut gave is named as the user typed it.
  const AppConfig typed = with_deepspeed("typed", kZero3, "", {{"train.steps=2", "--steps 2"}});
  ASSERT_EQ(typed.warnings.size(), 2u);
  EXPECT_NE(typed.warnings[1].find("replaces train.steps (2) from --steps 2"), std::string::npos)
      << typed.warnings[1];
  // train_batch_size = 2 x 4 x world size.
  check_world_size(c, 2);
  const std::string msg = error_of([&] { check_world_size(c, 4); });
  EXPECT_NE(msg.find("ds_config.json:2: train_batch_size: 16 must equal "
                     "train_micro_batch_size_per_gpu x gradient_accumulation_steps x world size "
                     "= 2 x 4 x 4 = 32; on 4 ranks set gradient_accumulation_steps: 2"),
            std::string::npos)
      << msg;
  // The largest batches times a world of processes pass 2^63: said, not wrapped; a micro
  // batch past 2^27 is refused.
  AppConfig big = c;
  big.train.batch = kMaxBatch;
  big.train.gradient_accumulation_steps = 1 << 20;
  EXPECT_NE(error_of([&] { check_world_size(big, 1 << 30); }).find("= more than 2^63; change"),
            std::string::npos);
  const std::string huge = error_of([&] {
    with_deepspeed("huge", R"({"train_micro_batch_size_per_gpu": 4611686018427387904})", "");
  });
  EXPECT_NE(huge.find("train_micro_batch_size_per_gpu"), std::string::npos) << huge;
}

// DeepSpeed's documented section (its defaults) is accepted. It tunes recomputation the
// model's code asks for and turns nothing on, so zt says where recomputation is turned on;
// tuning zt does not have is named as having no effect.
TEST(DeepSpeed, ActivationCheckpointingSection) {
  const char* json = R"({"activation_checkpointing": {
    "partition_activations": false, "cpu_checkpointing": false,
    "contiguous_memory_optimization": false, "number_checkpoints": null,
    "synchronize_checkpoint_boundary": false, "profile": false}})";
  const AppConfig c = with_deepspeed("activation_defaults", json);
  EXPECT_FALSE(c.train.activation_checkpointing);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("activation_checkpointing: DeepSpeed's section does not turn "
                               "recomputation on (the model's code does); in zt set "
                               "train.activation_checkpointing: true"),
            std::string::npos)
      << c.warnings[0];
  const AppConfig on =
      with_deepspeed("activation_on",
                     R"({"activation_checkpointing": {"number_checkpoints": 4, "profile": true}})",
                     "train:\n  steps: 10\n  activation_checkpointing: true\n");
  EXPECT_TRUE(on.train.activation_checkpointing);
  ASSERT_EQ(on.warnings.size(), 2u);
  EXPECT_NE(on.warnings[0].find("activation_checkpointing.profile: has no effect in zt"),
            std::string::npos)
      << on.warnings[0];
  EXPECT_NE(on.warnings[1].find("activation_checkpointing.number_checkpoints: has no effect"),
            std::string::npos)
      << on.warnings[1];
}

TEST(DeepSpeed, OffloadOptimizerToCpu) {
  const AppConfig c = with_deepspeed("offload", R"({
  "train_micro_batch_size_per_gpu": 2,
  "zero_force_ds_cpu_optimizer": true,
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "offload_param": {"device": "none"}
  }
})");
  EXPECT_TRUE(c.zero.offload_optimizer.enabled());
  EXPECT_EQ(c.zero.offload_optimizer.device, zero::OffloadDevice::kCpu);
  EXPECT_TRUE(c.zero.offload_optimizer.pin_memory);
  // Without the section, or with device none, the state stays on the training device.
  EXPECT_FALSE(with_deepspeed("zero3_none", kZero3).zero.offload_optimizer.enabled());
  // Parameter offload is still not implemented.
  const std::string msg = error_of([] {
    with_deepspeed("offload_param",
                   R"({"zero_optimization": {"offload_param": {"device": "cpu"}}})");
  });
  EXPECT_NE(msg.find("zero_optimization.offload_param: not supported by zt"), std::string::npos)
      << msg;
}

TEST(DeepSpeed, OptimizersAndSchedulers) {
  // DeepSpeed's "Adam" is AdamW unless adam_w_mode is false.
  EXPECT_EQ(with_deepspeed("adam", R"({"optimizer": {"type": "Adam", "params": {"lr": 1e-3}}})")
                .train.optimizer,
            Optimizer::adamw);
  AppConfig a = with_deepspeed(
      "adam_l2",
      R"({"optimizer": {"type": "Adam", "params": {"lr": 1e-3, "adam_w_mode": false}}})");
  EXPECT_EQ(a.train.optimizer, Optimizer::adam);
  AppConfig sgd = with_deepspeed(
      "sgd", R"({"optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.8}}})");
  EXPECT_EQ(sgd.train.optimizer, Optimizer::sgd);
  EXPECT_DOUBLE_EQ(sgd.train.momentum, 0.8);
  EXPECT_DOUBLE_EQ(sgd.train.lr, 0.1);
  EXPECT_FALSE(sgd.train.nesterov);
  // zt's SGD is torch's: Nesterov momentum and dampening map through.
  AppConfig nesterov = with_deepspeed("nesterov", R"({"optimizer": {"type": "SGD", "params":
      {"lr": 0.1, "momentum": 0.9, "nesterov": true}}})");
  EXPECT_TRUE(nesterov.train.nesterov);
  EXPECT_DOUBLE_EQ(nesterov.train.dampening, 0.0);
  AppConfig damped = with_deepspeed("dampening", R"({"optimizer": {"type": "SGD", "params":
      {"lr": 0.1, "momentum": 0.9, "dampening": 0.3}}})");
  EXPECT_DOUBLE_EQ(damped.train.dampening, 0.3);
  EXPECT_FALSE(damped.train.nesterov);
  const std::string both = error_of([] {
    with_deepspeed("nesterov_damped", R"({"optimizer": {"type": "SGD", "params":
        {"lr": 0.1, "momentum": 0.9, "dampening": 0.3, "nesterov": true}}})");
  });
  EXPECT_NE(both.find("optimizer.params.nesterov: Nesterov momentum needs momentum > 0 and "
                      "dampening 0, got momentum 0.9 and dampening 0.3"),
            std::string::npos)
      << both;
  AppConfig w = with_deepspeed("warmup", R"({"scheduler": {"type": "WarmupLR", "params":
      {"warmup_min_lr": 0, "warmup_max_lr": 2e-3, "warmup_num_steps": 7,
       "warmup_type": "linear"}}})");
  EXPECT_EQ(w.train.schedule, Schedule::constant);
  EXPECT_DOUBLE_EQ(w.train.lr, 2e-3);
  EXPECT_EQ(w.train.warmup, 7);
  EXPECT_TRUE(w.train.deepspeed_schedule) << "counted as DeepSpeed's schedulers count";
  EXPECT_FALSE(a.train.deepspeed_schedule) << "no scheduler section: the YAML's schedule";
  // torch_adam: DeepSpeed builds torch.optim.AdamW, whose weight_decay defaults to 0.01.
  EXPECT_DOUBLE_EQ(with_deepspeed("torch_adam", R"({"optimizer": {"type": "AdamW", "params":
      {"lr": 1e-3, "torch_adam": true}}})")
                       .train.weight_decay,
                   0.01);
  EXPECT_DOUBLE_EQ(a.train.weight_decay, 0.0);
  AppConfig d = with_deepspeed("decay", R"({"scheduler": {"type": "WarmupDecayLR", "params":
      {"warmup_max_lr": 1e-3, "warmup_num_steps": 3, "total_num_steps": 30}}})");
  EXPECT_EQ(d.train.schedule, Schedule::linear);
  EXPECT_EQ(d.train.steps, 30);
  EXPECT_DOUBLE_EQ(d.train.min_lr, 0.0);
  bool said_log = false;
  for (const auto& m : d.training_warnings)
    said_log |= m.find("DeepSpeed's default warmup is logarithmic") != std::string::npos;
  EXPECT_TRUE(said_log) << "warmup_type left at DeepSpeed's default (log) is noted";
  // Keys left out take DeepSpeed's defaults (WarmupLR and WarmupDecayLR: warmup_num_steps
  // 1000, warmup_max_lr 0.001, whatever the optimizer's lr; WarmupCosineLR: 1000), each
  // named in a warning when the YAML does not set the same thing.
  auto said = [](const AppConfig& c, const std::string& what) {
    for (const auto* list : {&c.warnings, &c.training_warnings})
      for (const auto& m : *list)
        if (m.find(what) != std::string::npos) return true;
    return false;
  };
  const char* kOptimizer = R"("optimizer": {"type": "AdamW", "params": {"lr": 3e-4}})";
  AppConfig dd = with_deepspeed("decay_defaults", std::string("{") + kOptimizer + R"(,
      "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 100,
      "warmup_type": "linear"}}})");
  EXPECT_EQ(dd.train.warmup, 1000);
  EXPECT_DOUBLE_EQ(dd.train.lr, 0.001);
  EXPECT_TRUE(said(dd,
                   "scheduler.type WarmupDecayLR without params.warmup_num_steps: "
                   "DeepSpeed's default warmup of 1000 updates applies"));
  EXPECT_TRUE(said(dd,
                   "rises to DeepSpeed's default warmup_max_lr, 0.001, in place of the "
                   "optimizer's 0.0003"));
  AppConfig cd = with_deepspeed("cosine_defaults", std::string("{") + kOptimizer + R"(,
      "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 100,
      "warmup_type": "linear"}}})");
  EXPECT_EQ(cd.train.warmup, 1000);
  EXPECT_DOUBLE_EQ(cd.train.lr, 3e-4) << "WarmupCosineLR scales the optimizer's lr";
  EXPECT_TRUE(said(cd, "DeepSpeed's default warmup of 1000 updates applies"));
  // A YAML warmup is replaced too, and the warning names both.
  AppConfig yd = with_deepspeed("yaml_warmup", R"({"scheduler": {"type": "WarmupLR", "params":
      {"warmup_max_lr": 1e-3, "warmup_type": "linear"}}})",
                                "train:\n  steps: 10\n  warmup: 5\n");
  EXPECT_EQ(yd.train.warmup, 1000);
  EXPECT_TRUE(said(yd, "sets train.warmup to 1000, replacing 5"));
  EXPECT_FALSE(said(yd, "without params.warmup_num_steps"));
  // fp16 with dynamic scaling.
  AppConfig f = with_deepspeed("fp16", R"({"fp16": {"enabled": true, "loss_scale": 0,
      "initial_scale_power": 12, "loss_scale_window": 100, "hysteresis": 2,
      "consecutive_hysteresis": true, "min_loss_scale": 1}})");
  EXPECT_TRUE(f.zero.precision.fp16);
  EXPECT_TRUE(f.zero.precision.consecutive_hysteresis);
  EXPECT_EQ(f.zero.precision.initial_scale_power, 12);
  EXPECT_EQ(f.train.dtype, "f16");
}

TEST(DeepSpeed, ItsSectionsReplaceTheYamlsWithAWarning) {
  // The shipped tiny config has zero_optimization and train.dtype: f32; a DeepSpeed
  // config with its own zero_optimization and bf16 takes over both, and says so.
  const std::string yaml =
      "train:\n  dtype: f32\nzero_optimization:\n  reduce_bucket_size: 7\n  sync_batchnorm: true\n";
  AppConfig c = with_deepspeed(
      "replace", R"({"bf16": {"enabled": true}, "zero_optimization": {"reduce_bucket_size": 9}})",
      yaml);
  EXPECT_EQ(c.zero.reduce_bucket_size, 9);
  EXPECT_TRUE(c.zero.precision.bf16);
  EXPECT_EQ(c.train.dtype, "bf16");
  std::string all;
  for (const auto& w : c.warnings) all += w + "\n";
  EXPECT_NE(all.find("run.yaml:3: zero_optimization: replaced by the DeepSpeed config's section"),
            std::string::npos)
      << all;
  // Section by section: a YAML key the JSON's section leaves out (zt's own sync_batchnorm)
  // goes back to its default, and the warning names it.
  EXPECT_FALSE(c.zero.sync_batchnorm);
  EXPECT_NE(all.find("; its keys the DeepSpeed config does not set go back to their defaults: "
                     "sync_batchnorm\n"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("run.yaml:2: train.dtype: f32 is replaced by the DeepSpeed config's bf16"),
            std::string::npos)
      << all;
  // One precision section in the JSON replaces both of the YAML's, the one it lacks too.
  AppConfig one = with_deepspeed("one_section", R"({"fp16": {"enabled": false}})",
                                 "train:\n  dtype: bf16\nbf16:\n  enabled: true\n");
  EXPECT_FALSE(one.zero.precision.bf16);
  EXPECT_EQ(one.train.dtype, "f32");
  all.clear();
  for (const auto& w : one.warnings) all += w + "\n";
  EXPECT_NE(all.find("run.yaml:3: bf16: replaced by the DeepSpeed config's precision"),
            std::string::npos)
      << all;
  // The YAML's SGD settings under the JSON's AdamW are checked as merged: no effect, a
  // warning (not SGD's refusal of Nesterov momentum without momentum).
  AppConfig adamw =
      with_deepspeed("sgd_left", R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})",
                     "train:\n  optimizer: sgd\n  nesterov: true\n  momentum: 0\n");
  EXPECT_EQ(adamw.train.optimizer, Optimizer::adamw);
  all.clear();
  for (const auto& w : adamw.training_warnings) all += w + "\n";
  EXPECT_NE(all.find("train.nesterov has no effect with optimizer adamw"), std::string::npos)
      << all;
  // Adam's betas and eps left out take DeepSpeed's defaults, as SGD's momentum does (the
  // YAML's are replaced, with a warning); lr keeps the YAML's.
  AppConfig adam = with_deepspeed(
      "adam_defaults", R"({"optimizer": {"type": "AdamW", "params": {"weight_decay": 0}}})",
      "train:\n  lr: 0.002\n  betas: [0.5, 0.9]\n  eps: 1e-6\n");
  EXPECT_EQ(adam.train.betas, (std::array<double, 2>{0.9, 0.999}));
  EXPECT_DOUBLE_EQ(adam.train.eps, 1e-8);
  EXPECT_DOUBLE_EQ(adam.train.lr, 0.002);
  all.clear();
  for (const auto& w : adam.warnings) all += w + "\n";
  EXPECT_NE(all.find("optimizer.type AdamW sets train.betas to [0.9, 0.999], replacing [0.5, 0.9]"),
            std::string::npos)
      << all;
  // Without precision sections in the JSON, the YAML's apply.
  AppConfig y = with_deepspeed("keep", R"({"train_micro_batch_size_per_gpu": 3})",
                               "fp16:\n  enabled: true\n");
  EXPECT_TRUE(y.zero.precision.fp16);
  EXPECT_EQ(y.train.batch, 3);
}

struct BadCase {
  const char* name;
  const char* json;
  std::string yaml;
  std::vector<std::string> expect;
};

const std::vector<BadCase> kBad = {
    {"adam_eps_zero",
     R"({"optimizer": {"type": "Adam", "params": {"lr": 1e-3, "eps": 0}}})",
     "",
     {"ds_config.json:1: optimizer.params.eps: eps must be > 0 with Adam and AdamW"}},
    {"offload_nvme",
     R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}})",
     "",
     {"ds_config.json:1: zero_optimization.offload_param: not supported by zt"}},
    {"offload_optimizer_nvme",
     "{\n\"zero_optimization\": {\n\"offload_optimizer\": {\"device\": \"nvme\", "
     "\"nvme_path\": \"/local_nvme\"}}}",
     "",
     {"ds_config.json:3: zero_optimization.offload_optimizer.device: device: nvme is not "
      "supported by zt (optimizer state offloads to host memory only)"}},
    {"offload_optimizer_unknown",
     "{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\", \"pinned\": true}}}",
     "",
     {"zero_optimization.offload_optimizer.pinned: unknown key"}},
    {"zeropp",
     "{\"zero_optimization\": {\"zero_quantized_weights\": true}}",
     "",
     {"zero_optimization.zero_quantized_weights: not supported by zt (ZeRO++"}},
    {"hpz",
     "{\"zero_optimization\": {\"zero_hpz_partition_size\": 8}}",
     "",
     {"zero_optimization.zero_hpz_partition_size: not supported by zt"}},
    // DeepSpeed's own precision keys, asking for what zt does not do: named, with why.
    {"auto_cast",
     "{\"fp16\": {\"enabled\": true, \"auto_cast\": true}}",
     "",
     {"fp16.auto_cast: not supported by zt (the engine casts no inputs"}},
    {"fp16_master_weights",
     "{\"fp16\": {\"enabled\": true, \"fp16_master_weights_and_grads\": true}}",
     "",
     {"fp16.fp16_master_weights_and_grads: not supported by zt (zt keeps fp32 master"}},
    {"bf16_overflow_check",
     "{\"bf16\": {\"enabled\": true, \"check_grad_overflow\": true}}",
     "",
     {"bf16.check_grad_overflow: not supported by zt (bf16 needs no loss scale"}},
    {"torch_autocast",
     "{\"torch_autocast\": {\"enabled\": true, \"dtype\": \"bfloat16\"}}",
     "",
     {"torch_autocast: not supported by zt (zt has no autocast"}},
    {"unknown_top",
     "{\"train_micro_batch_size_per_gpus\": 2}",
     "",
     {"train_micro_batch_size_per_gpus: unknown key; did you mean "
      "'train_micro_batch_size_per_gpu'?"}},
    {"unknown_zero",
     "{\"zero_optimization\": {\"stage3_prefetch_bucket\": 5}}",
     "",
     {"zero_optimization.stage3_prefetch_bucket: unknown key"}},
    {"auto_value",
     "{\"train_micro_batch_size_per_gpu\": \"auto\"}",
     "",
     {"train_micro_batch_size_per_gpu: \"auto\" is a placeholder that Hugging Face's Trainer"}},
    {"optimizer_lamb",
     "{\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"lr\": 1e-3}}}",
     "",
     {"optimizer.type: optimizer 'Lamb' is not supported by zt: use Adam, AdamW or SGD"}},
    {"optimizer_param",
     "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"amsgrad\": true}}}",
     "",
     {"optimizer.params.amsgrad: unknown key"}},
    {"scheduler_onecycle",
     "{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {}}}",
     "",
     {"scheduler.type: scheduler 'OneCycle' is not supported by zt"}},
    {"warmup_log",
     "{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_type\": \"log\"}}}",
     "",
     {"scheduler.params.warmup_type: zt warms up linearly"}},
    {"warmup_zero",
     R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 0,
         "warmup_type": "linear", "warmup_max_lr": 0.001}}})",
     "",
     {"ds_config.json:1: scheduler.params.warmup_num_steps: must be a positive integer, got 0 "
      "(DeepSpeed refuses 0 too)"}},
    {"warmup_zero_cosine",
     R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 10,
         "warmup_num_steps": 0, "warmup_type": "linear"}}})",
     "",
     {"ds_config.json:2: scheduler.params.warmup_num_steps: must be a positive integer, got 0"}},
    {"tensorboard",
     "{\"tensorboard\": {\"enabled\": true, \"output_path\": \"tb\"}}",
     "",
     {"tensorboard: not supported by zt"}},
    {"activation_partition",
     "{\"activation_checkpointing\": {\"partition_activations\": true}}",
     "",
     {"activation_checkpointing.partition_activations: zt does not partition checkpointed "
      "activations across ranks"}},
    {"activation_cpu",
     "{\"activation_checkpointing\": {\"cpu_checkpointing\": true}}",
     "",
     {"activation_checkpointing.cpu_checkpointing: zt keeps checkpointed activations on the "
      "device"}},
    {"activation_bool",
     "{\"activation_checkpointing\": true}",
     "",
     {"activation_checkpointing: expected an object of settings",
      "to recompute activations "
      "set train.activation_checkpointing: true"}},
    {"activation_unknown",
     "{\"activation_checkpointing\": {\"partition_activation\": false}}",
     "",
     {"activation_checkpointing.partition_activation: unknown key"}},
    {"batch_unknown",
     "{\"train_batch_size\": 16}",
     "",
     {"ds_config.json:1: train_batch_size: zt needs train_micro_batch_size_per_gpu"}},
    {"offload_param_typo",
     R"({"zero_optimization": {"stage": 3, "offload_param": {"devise": "cpu"}}})",
     "",
     {"zero_optimization.offload_param.devise: unknown key; did you mean"}},
    {"fp16_key",
     "{\"fp16\": {\"enabled\": true, \"autocast\": true}}",
     "",
     {"fp16.autocast: unknown key; did you mean 'fp16.auto_cast'?"}},
    {"predivide",
     "{\"gradient_predivide_factor\": 2.0}",
     "",
     {"gradient_predivide_factor: not supported by zt"}},
    {"communication_dtype",
     "{\"bf16\": {\"enabled\": true}, \"communication_data_type\": \"fp16\"}",
     "",
     {"communication_data_type: not supported by zt (zt reduces gradients in fp32"}},
};

// Unsupported keys set to what zt does anyway (DeepSpeed's defaults) are accepted.
TEST(DeepSpeed, UnsupportedKeysAtTheirNeutralValuesAreAccepted) {
  for (const char* json :
       {R"({"gradient_predivide_factor": 1.0, "prescale_gradients": false})",
        R"({"communication_data_type": "fp32"})",
        R"({"bf16": {"enabled": true}, "communication_data_type": "bf16"})",
        R"({"fp16": {"enabled": true}, "communication_data_type": "fp16"})",
        R"({"tensorboard": {"enabled": false}})", R"({"torch_autocast": {"enabled": false}})",
        R"({"fp16": {"enabled": true, "auto_cast": false,
                               "fp16_master_weights_and_grads": false}})",
        R"({"bf16": {"enabled": true, "check_grad_overflow": false}})",
        R"({"zero_optimization": {"offload_param": {"device": "none",
                               "nvme_path": null, "pin_memory": false}}})"}) {
    SCOPED_TRACE(json);
    EXPECT_EQ(error_of([&] { with_deepspeed("neutral", json); }), "");
  }
  // bf16's immediate_grad_update is what zt does at either value: a warning says so.
  const AppConfig c =
      with_deepspeed("immediate", R"({"bf16": {"enabled": true, "immediate_grad_update": false}})");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("bf16.immediate_grad_update: has no effect in zt"),
            std::string::npos)
      << c.warnings[0];
  // The training dtype may come from the YAML as well.
  EXPECT_EQ(error_of([] {
              with_deepspeed("neutral_yaml", R"({"communication_data_type": "bf16"})",
                             "train:\n  steps: 10\n  dtype: bf16\n");
            }),
            "");
}

class BadDeepSpeed : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadDeepSpeed, FailsNamingTheKey) {
  const BadCase& c = GetParam();
  const std::string msg = error_of([&] { with_deepspeed(c.name, c.json, c.yaml); });
  for (const auto& frag : c.expect) EXPECT_NE(msg.find(frag), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Table, BadDeepSpeed, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return std::string(info.param.name); });

// DeepSpeed reads its config with hjson: comments of three kinds and trailing commas are
// fine (also a '#' or '//' inside a string), a key given twice is an error naming both lines.
TEST(DeepSpeed, TheFileIsReadAsDeepSpeedReadsIt) {
  const AppConfig c = with_deepspeed("hjson", R"({
  # per rank
  "train_micro_batch_size_per_gpu": 3,  // the micro batch
  /* two lines
     of comment */ "gradient_accumulation_steps": 2,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95],},},
  "tensorboard": {"enabled": false, "output_path": "runs/#1//x"},
})");
  EXPECT_EQ(c.train.batch, 3);
  EXPECT_EQ(c.train.gradient_accumulation_steps, 2);
  EXPECT_DOUBLE_EQ(c.train.betas[1], 0.95);
  const std::string msg = error_of([&] {
    with_deepspeed("twice",
                   "{\"train_micro_batch_size_per_gpu\": 2,\n"
                   " \"train_micro_batch_size_per_gpu\": 4}");
  });
  EXPECT_NE(msg.find("ds_config.json:2: train_micro_batch_size_per_gpu: duplicate key (first "
                     "given at line 1)"),
            std::string::npos)
      << msg;
}

TEST(DeepSpeed, MissingFileIsNamedAtTheKey) {
  const std::string y =
      write_temp("missing", "run.yaml", "deepspeed_config: /nonexistent/ds.json\n");
  const std::string msg = error_of([&] { load_app_config(y); });
  EXPECT_NE(msg.find("run.yaml:1: deepspeed_config: no DeepSpeed config at '/nonexistent/ds.json'"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace zt::config
