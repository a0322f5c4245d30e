// A DeepSpeed JSON config as a DeepSpeed user writes it for ZeRO-3 (micro batch,
// accumulation, train_batch_size, clipping, AdamW, a warmup schedule, bf16 and
// zero_optimization) trains vqtok and vqgpt on thread ranks; a train_batch_size that
// does not fit the world size stops the run before it starts, while the commands that read
// the weights at another world size are not held to it; a checkpoint records the JSON, so
// a resume compares the settings it gave.
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "apps/app_test_util.h"
#include "apps/common/saved_run.h"
#include "apps/common/train_util.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "configs/config.h"
#include "configs/deepspeed.h"
#include "nn/nn.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "optim/factory.h"
#include "zero/scope.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

const char* kDsConfig = R"({
  "train_batch_size": 8,
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 2,
  "gradient_clipping": 1.0,
  "steps_per_print": 1,
  "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "betas": [0.9, 0.99], "eps": 1e-8,
                                            "weight_decay": 0.0}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 2e-3,
                                               "warmup_num_steps": 1, "warmup_type": "linear"}},
  "bf16": {"enabled": true},
  "zero_optimization": {"stage": 3, "overlap_comm": true, "contiguous_gradients": true,
                        "reduce_bucket_size": 5e4, "stage3_prefetch_bucket_size": 5e4,
                        "stage3_param_persistence_threshold": 100,
                        "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
                        "offload_optimizer": {"device": "none"},
                        "offload_param": {"device": "none"}}
})";

struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() / ("zt_ds_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "ds_config.json") << kDsConfig;
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string path(const std::string& f) const { return (dir / f).string(); }
};

// The YAML keeps model, data and run length; the DeepSpeed config the rest.
config::AppConfig load(const Scratch& s, const std::string& yaml, config::App app) {
  std::ofstream(s.path("run.yaml")) << yaml << "output_dir: " << s.path("out") << "\n"
                                    << "deepspeed_config: " << s.path("ds_config.json") << "\n";
  return config::load_app_config(s.path("run.yaml"), {}, app);
}

// A tiny vqtok run's YAML: its model and data, and `train` as its train section.
std::string vqtok_yaml(const std::string& train) {
  return "model: {codebook_size: 32, ch: 32, ch_mult: [1, 1], num_res_blocks: 1, "
         "attn_resolutions: []}\n"
         "data: {kind: synthetic, frames: 4, height: 8, width: 8, num_samples: 32, "
         "eval_samples: 2}\n"
         "train: " +
         train + "\n";
}

}  // namespace

// DeepSpeed's schedulers step after each update, starting at the warmup's start: update 0
// runs at lr 0 and update u at DeepSpeed's iteration u - 1, with a warmup of at least 2.
// The values are DeepSpeed 0.19's for lr 0.01, warmup 10 and 30 steps.
TEST(DeepSpeedApp, SchedulesCountUpdatesAsDeepSpeedDoes) {
  config::TrainConfig t;
  t.lr = 0.01;
  t.warmup = 10;
  t.steps = 30;
  t.deepspeed_schedule = true;
  t.schedule = config::Schedule::constant;  // WarmupLR
  const app::LrPlan warm(t);
  EXPECT_EQ(warm.lr_at(0), 0.0);
  EXPECT_EQ(warm.lr_at(1), 0.0);
  EXPECT_NEAR(warm.lr_at(2), 0.001, 1e-15);
  EXPECT_NEAR(warm.lr_at(10), 0.009, 1e-15);
  EXPECT_EQ(warm.lr_at(11), 0.01);
  t.schedule = config::Schedule::linear;  // WarmupDecayLR: to 0 at iteration 30
  const app::LrPlan decay(t);
  EXPECT_EQ(decay.lr_at(11), 0.01);
  EXPECT_NEAR(decay.lr_at(12), 0.0095, 1e-15);
  EXPECT_NEAR(decay.lr_at(29), 0.001, 1e-15);
  EXPECT_NEAR(decay.lr_at(30), 0.0005, 1e-15);
  EXPECT_EQ(decay.lr_at(31), 0.0);
  t.schedule = config::Schedule::cosine;  // WarmupCosineLR, cos_min_ratio 0.1
  t.min_lr = 0.001;
  const app::LrPlan cosine(t);
  EXPECT_NEAR(cosine.lr_at(10), 0.009, 1e-15);
  EXPECT_NEAR(cosine.lr_at(11), 0.001 + 0.009 * 0.5 * (1 + std::cos(M_PI / 20)), 1e-15);
  EXPECT_NEAR(cosine.lr_at(30), 0.001, 1e-15);
  t.warmup = 1;  // at least 2 iterations
  t.schedule = config::Schedule::constant;
  const app::LrPlan short_warmup(t);
  EXPECT_EQ(short_warmup.lr_at(1), 0.0);
  EXPECT_NEAR(short_warmup.lr_at(2), 0.005, 1e-15);
  EXPECT_EQ(short_warmup.lr_at(3), 0.01);
}

TEST(DeepSpeedApp, Zero3JsonTrainsVqtok) {
  Scratch s("vqtok");
  const config::AppConfig cfg =
      load(s, vqtok_yaml("{steps: 2, eval_every: 0, checkpoint_every: 0}"), config::App::vqtok);
  EXPECT_TRUE(cfg.zero.precision.bf16);
  EXPECT_EQ(cfg.train.batch, 2);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    const vqtok::TrainResult r = vqtok::train(cfg, o, comm);
    EXPECT_EQ(r.steps, 2);
    ASSERT_EQ(r.log_losses.size(), 2u);
    for (double l : r.log_losses) EXPECT_TRUE(std::isfinite(l));
  });
  // 2 x 2 x 3 ranks = 12, not DeepSpeed's train_batch_size of 8.
  comm::run_threads(3, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    EXPECT_TRUE(
        test::throws_with([&] { vqtok::train(cfg, o, comm); }, "train_batch_size: 8 must equal"));
  });
}

// The checkpoint keeps the DeepSpeed JSON as it was: a resume with the file edited, or
// without it, lists what changed (or refuses another precision before the load).
TEST(DeepSpeedApp, AResumeComparesTheDeepSpeedSettingsTheCheckpointWasTrainedWith) {
  Scratch s("resume");
  const std::string yaml = R"(
model: {codebook_size: 32, ch: 32, ch_mult: [1, 1], num_res_blocks: 1, attn_resolutions: []}
data: {kind: synthetic, frames: 4, height: 8, width: 8, num_samples: 32, eval_samples: 2}
train: {steps: 2, eval_every: 0, checkpoint_every: 2}
)";
  const config::AppConfig cfg = load(s, yaml, config::App::vqtok);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    vqtok::train(cfg, o, comm);
  });
  const std::string ckpt = s.path("out/checkpoints");
  auto resume_note = [&](const config::AppConfig& now) {
    std::string note;
    comm::run_threads(1, [&](comm::Communicator& comm) {
      testing::internal::CaptureStderr();
      const std::string err = test::error_of(
          [&] { app::check_resume_config(now, ckpt, "vqtok", "vqtok train", comm, false); });
      note = testing::internal::GetCapturedStderr() + err;
    });
    return note;
  };
  EXPECT_EQ(resume_note(cfg), "") << "the same settings: nothing to say";
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string text = kDsConfig;
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + 1))
      text.replace(at, from.size(), to);
    std::ofstream(s.path("ds_config.json"), std::ios::trunc) << text;
    return load(s, yaml, config::App::vqtok);
  };
  std::string note = resume_note(edit("2e-3", "5e-4"));
  EXPECT_NE(note.find("train.lr (0.002 in the checkpoint, 0.0005 in this config)"),
            std::string::npos)
      << note;
  note = resume_note(edit("\"bf16\"", "\"fp16\""));
  EXPECT_NE(note.find("trained in bf16 and this config trains in f16"), std::string::npos) << note;
  // Each training setting the JSON gives is compared as it resolved, and named on its own.
  const std::vector<std::array<std::string, 3>> edits = {
      {"[0.9, 0.99]", "[0.8, 0.99]", "train.betas[0] (0.9 in the checkpoint, 0.8 in this config)"},
      {"[0.9, 0.99]", "[0.9, 0.95]",
       "train.betas[1] (0.99 in the checkpoint, 0.95 in this config)"},
      {"1e-8", "1e-6", "train.eps (1e-08 in the checkpoint, 1e-06 in this config)"},
      {"\"weight_decay\": 0.0", "\"weight_decay\": 0.1",
       "train.weight_decay (0 in the checkpoint, 0.1 in this config)"},
      {"\"warmup_num_steps\": 1", "\"warmup_num_steps\": 3",
       "train.warmup (1 in the checkpoint, 3 in this config)"},
      {"\"gradient_clipping\": 1.0", "\"gradient_clipping\": 0.5",
       "train.gradient_clipping (1 in the checkpoint, 0.5 in this config)"},
      {"\"train_micro_batch_size_per_gpu\": 2", "\"train_micro_batch_size_per_gpu\": 4",
       "train.batch (2 in the checkpoint, 4 in this config)"}};
  for (const auto& [from, to, named] : edits) {
    note = resume_note(edit(from, to));
    EXPECT_NE(note.find(named), std::string::npos) << note;
    EXPECT_EQ(note.find(", train."), std::string::npos) << "only " << named << ": " << note;
  }
  // Without the JSON: the YAML's own values (and precision) differ from the checkpoint's.
  std::ofstream(s.path("plain.yaml")) << yaml << "output_dir: " << s.path("out") << "\n"
                                      << "bf16: {enabled: true}\n";
  note = resume_note(config::load_app_config(s.path("plain.yaml"), {}, config::App::vqtok));
  EXPECT_NE(note.find("train.gradient_clipping (1 in the checkpoint, 0 in this config)"),
            std::string::npos)
      << note;
}

// The JSON is read once, when the config is: a file deleted during the run (a launcher's
// temporary, say) does not fail the saves, and a checkpoint records the text the run was
// configured with, not an edit made since.
TEST(DeepSpeedApp, ACheckpointRecordsTheJsonAsTheRunReadIt) {
  Scratch s("gone");
  const config::AppConfig cfg =
      load(s, vqtok_yaml("{steps: 2, eval_every: 0, checkpoint_every: 1}"), config::App::vqtok);
  std::ofstream(s.path("ds_config.json"), std::ios::trunc) << "{\"edited\": true}";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    if (comm.rank() == 0) fs::remove(s.path("ds_config.json"));
    comm.barrier();
    vqtok::TrainOptions o;
    o.quiet = true;
    EXPECT_EQ(test::error_of([&] { vqtok::train(cfg, o, comm); }), "");
  });
  for (const char* step : {"step_000001", "step_000002"})
    EXPECT_EQ(app::read_saved_run(s.path("out/checkpoints/") + step).deepspeed_json, kDsConfig)
        << step;
}

TEST(DeepSpeedApp, Zero3JsonTrainsVqgpt) {
  Scratch s("vqgpt");
  const config::AppConfig cfg = load(s, R"(
model: {codebook_size: 64, ch: 32, ch_mult: [1, 2], num_res_blocks: 1, attn_resolutions: []}
gpt: {n_layer: 1, n_head: 2, n_embd: 32, tokenizer_checkpoint: none}
data: {kind: synthetic, frames: 4, height: 8, width: 8, num_samples: 64, eval_samples: 4}
train: {steps: 2, eval_every: 0, checkpoint_every: 0}
replicated: [tokenizer]
)",
                                     config::App::vqgpt);
  const std::string weights = s.path("tokenizer.safetensors");
  for (const vqgpt::TrainResult& r : apptest::train_vqgpt_with_fresh_tokenizer(cfg, weights)) {
    EXPECT_EQ(r.steps, 2);
    ASSERT_FALSE(r.log_losses.empty());
    for (double l : r.log_losses) EXPECT_TRUE(std::isfinite(l));
  }
}

// Only training is held to train_batch_size: a tokenizer trained on 2 ranks under it
// exports, evaluates and loads as vqgpt's tokenizer on 1 rank, and train.trace, a training
// setting, writes no timeline from them. The checkpoint's own config names the JSON it
// recorded, never the temporary file it was read through.
TEST(DeepSpeedApp, ReadingWeightsIsNotHeldToTheTrainingBatchSize) {
  Scratch s("read");
  const std::string model =
      "model: {codebook_size: 32, ch: 32, ch_mult: [1, 1], num_res_blocks: 1, "
      "attn_resolutions: []}\n"
      "data: {kind: synthetic, frames: 4, height: 8, width: 8, num_samples: 32, "
      "eval_samples: 2}\n";
  config::AppConfig cfg = load(s, model + "train: {steps: 1, eval_every: 0, checkpoint_every: 1}\n",
                               config::App::vqtok);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    vqtok::train(cfg, o, comm);
  });
  cfg.train.trace = s.path("trace.json");
  const std::string ckpt = s.path("out/checkpoints");
  const config::AppConfig gpt_cfg = config::parse_app_config(
      config::parse_yaml(model + "gpt: {n_layer: 1, n_head: 2, n_embd: 32, tokenizer_checkpoint: " +
                             ckpt + "}\nreplicated: [tokenizer]\n",
                         "test"),
      config::App::vqgpt);
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqtok::export_model(cfg, "", s.path("tok.safetensors"), comm, /*quiet=*/true);
    vqtok::EvalOptions e;
    e.weights = ckpt;
    EXPECT_GT(vqtok::evaluate(cfg, e, comm).clips, 0);
    EXPECT_TRUE(vqgpt::load_tokenizer(gpt_cfg, "", comm));
  });
  EXPECT_TRUE(fs::exists(s.path("tok.safetensors")));
  for (const auto& e : fs::directory_iterator(s.dir))
    EXPECT_EQ(e.path().filename().string().rfind("trace", 0), std::string::npos) << e.path();

  app::SavedRun run = app::read_saved_run(ckpt);
  const std::string recorded = run.dir + "/meta.json: user.deepspeed_json";
  const config::AppConfig saved = app::saved_config(run, config::App::vqtok);
  std::string err = test::error_of([&] { config::check_world_size(saved, 1); });
  EXPECT_EQ(err.rfind(recorded + ":2: train_batch_size: 8 must equal", 0), 0u) << err;
  run.deepspeed_json = R"({"train_micro_batch_size_per_gpu": 2, "no_such_key": 1})";
  err = test::error_of([&] { app::saved_config(run, config::App::vqtok); });
  EXPECT_NE(err.find(recorded + ":1"), std::string::npos) << err;
  EXPECT_NE(err.find("no_such_key"), std::string::npos) << err;
  EXPECT_EQ(err.find("zt_saved_deepspeed"), std::string::npos) << err;
}

// A setting only training reads (a warmup beyond the run) is said to the commands that
// train or plan, not to one that only reads weights (vqgpt sample, vqtok eval).
TEST(DeepSpeedApp, OnlyTrainingIsToldOfTrainingOnlySettings) {
  const std::string dir = apptest::fresh_dir("zt_ds_app", "told");
  const config::AppConfig cfg = apptest::tiny_vqtok_config(dir, {"train.warmup=1000003"});
  ASSERT_EQ(cfg.training_warnings.size(), 1u);
  const std::string& warmup = cfg.training_warnings[0];
  EXPECT_NE(warmup.find("train.warmup has no effect beyond train.steps"), std::string::npos)
      << warmup;
  for (const std::string& w : cfg.warnings) EXPECT_NE(w, warmup);
  auto said_by = [&](app::EngineUse use) {
    ::testing::internal::CaptureStderr();
    comm::run_threads(1, [&](comm::Communicator& comm) {
      std::shared_ptr<vq::VqModel> model;
      {
        zero::Init init(comm);
        model = std::make_shared<vq::VqModel>(cfg.model);
      }
      app::make_engine(model, cfg, comm, use, /*quiet=*/true);
    });
    return ::testing::internal::GetCapturedStderr();
  };
  std::string err = said_by(app::EngineUse::reading_weights);
  EXPECT_EQ(err.find(warmup), std::string::npos) << err;
  err = said_by(app::EngineUse::training);
  EXPECT_NE(err.find(warmup), std::string::npos) << err;
}

// An optimizer switched by one key (a DeepSpeed JSON's optimizer section, or --set) leaves
// the other's settings harmless: SGD's nesterov beside adamw is a warning, and the
// optimizer builds.
TEST(DeepSpeedApp, AnotherOptimizersSettingsLeftInTheConfigAreHarmless) {
  const config::AppConfig cfg =
      apptest::tiny_vqtok_config(apptest::fresh_dir("zt_ds_app", "nesterov"),
                                 {"train.optimizer=sgd", "train.momentum=0.9",
                                  "train.nesterov=true", "train.optimizer=adamw"});
  ASSERT_EQ(cfg.train.optimizer, config::Optimizer::adamw);
  std::string warnings;
  for (const std::string& w : cfg.training_warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("train.nesterov has no effect with optimizer adamw"), std::string::npos)
      << warnings;
  nn::Linear layer(2, 3);
  EXPECT_EQ(test::error_of([&] {
              optim::make_optimizer(app::optimizer_config(cfg.train), layer.named_parameters());
            }),
            "");
}
