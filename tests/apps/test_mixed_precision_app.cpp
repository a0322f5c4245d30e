// Mixed precision from a config file, through the apps' engine construction
// (config::parse_app_config -> app::make_engine) on thread ranks:
//  1. `bf16: {enabled: true}` stores and gathers the partitioned parameters in bf16 while
//     the optimizer updates fp32 masters, and a few steps train the tokenizer;
//  2. `fp16: {enabled: true, ...}` starts the loss scale at 2^initial_scale_power,
//     doubles it after loss_scale_window good steps and halves it (skipping the update)
//     after an overflow;
//  3. configs/emu3_vision_tokenizer.yaml (train.dtype: bf16), shrunk with --set
//     overrides, trains a step and saves a checkpoint with vqtok's own train();
//  4. vqgpt trains its partitioned GPT in bf16 beside the replicated f32 tokenizer;
//  5. train.weight_decay_1d and train.no_weight_decay reach the optimizer of the fp32
//     masters, decided by each parameter's full shape and name;
//  6. a quiet fp16 run prints nothing, not even the engine's notes on its overflows;
//  7. an fp16 step that an overflow skips is no replica check in vqgpt's log or result;
//  8. cosine codes train in fp16 (their normalization runs in f32).
#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "apps/app_test_util.h"
#include "apps/common/metrics.h"
#include "apps/common/train_util.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "apps/vqgpt_test_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "configs/config.h"
#include "core/ops.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/param.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

const char* kYaml = R"(
model: {codebook_size: 32, embed_dim: 4, z_channels: 4, ch: 32, ch_mult: [1, 1],
        num_res_blocks: 1, attn_resolutions: [], temporal_downsample_factor: 4}
data: {kind: synthetic, frames: 4, height: 8, width: 8, num_samples: 16, eval_samples: 2}
train: {steps: 4, batch: 2, lr: 1.0e-3, schedule: constant}
zero_optimization: {stage3_param_persistence_threshold: 64, reduce_bucket_size: 4096}
output_dir: unset
)";

config::AppConfig config_with(const std::vector<std::string>& sets) {
  config::Node root = config::parse_yaml(kYaml, "test_mixed_precision_app");
  for (const auto& s : sets) config::apply_override(root, s);
  return config::parse_app_config(root, config::App::vqtok);
}

std::string fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("zt_mp_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

// What a checkpoint holds in `file`: how many tensors under each prefix ("param/",
// "master/") have each dtype, as "param/ bf16" -> count.
std::map<std::string, int> dtypes_in(const std::string& checkpoint, const std::string& file) {
  nn::SafetensorsFile f(checkpoint + "/" + file);
  std::map<std::string, int> out;
  for (const std::string& k : f.keys())
    out[k.substr(0, k.find('/') + 1) + " " + dtype_name(f.info(k).dtype)]++;
  return out;
}

struct EngineRun {
  std::shared_ptr<vq::VqModel> model;
  std::unique_ptr<zero::Engine> engine;
};

EngineRun build(const config::AppConfig& cfg, comm::Communicator& comm) {
  manual_seed(3);
  EngineRun r;
  {
    zero::Init init(comm);
    r.model = std::make_shared<vq::VqModel>(cfg.model);
  }
  r.engine = app::make_engine(r.model, cfg, comm, app::EngineUse::training);
  return r;
}

// One forward/backward/step on a fixed batch; the loss is scaled by `blow_up` (an f32
// factor applied outside the model, so a huge one overflows the 16-bit gradients).
std::pair<double, bool> step(EngineRun& r, int i, double blow_up = 1.0) {
  Generator g(100 + static_cast<uint64_t>(i % 2));
  Tensor clips = add(mul(rand({2, 4, 3, 8, 8}, g), 2.0), -1.0);
  std::vector<Tensor> out = r.engine->forward({clips});
  EXPECT_EQ(out[0].dtype(), DType::f32) << "tensors leave the model in f32";
  Tensor loss = add(mse_loss(out[0], clips), out[2]);
  r.engine->backward(mul(loss, blow_up));
  const bool stepped = r.engine->step();
  return {loss.item(), stepped};
}

}  // namespace

TEST(MixedPrecisionApp, Bf16FromYamlStoresBf16AndUpdatesF32Masters) {
  const config::AppConfig cfg = config_with({"bf16={enabled: true}"});
  ASSERT_TRUE(cfg.zero.precision.bf16);
  EXPECT_EQ(cfg.train.dtype, "bf16");
  comm::run_threads(2, [&](comm::Communicator& comm) {
    EngineRun r = build(cfg, comm);
    std::vector<Tensor> masters_before;
    for (const auto& mp : r.engine->partitioned())
      masters_before.push_back(zero::zero_param(mp.param)->master.clone());
    double first = 0, last = 0;
    for (int i = 0; i < 6; ++i) {
      last = step(r, i).first;
      if (i == 0) first = last;
      ASSERT_TRUE(std::isfinite(last));
    }
    EXPECT_LT(last, first) << "bf16 training lowers the loss";
    ASSERT_FALSE(r.engine->partitioned().empty());
    size_t i = 0;
    for (const auto& mp : r.engine->partitioned()) {
      zero::ZeroParam* z = zero::zero_param(mp.param);
      EXPECT_EQ(mp.param.dtype(), DType::bf16) << mp.name;
      EXPECT_EQ(z->shard.dtype(), DType::bf16) << mp.name;
      ASSERT_TRUE(zero::zero_param(mp.param)->master.defined()) << mp.name;
      EXPECT_EQ(zero::zero_param(mp.param)->master.dtype(), DType::f32) << mp.name;
      EXPECT_CLOSE(z->shard.to(DType::f32),
                   zero::zero_param(mp.param)->master.to(DType::bf16).to(DType::f32), 0, 0)
          << mp.name << ": the bf16 shard is the rounded master";
      if (zero::zero_param(mp.param)->master.numel() > 0 &&
          mp.name.find("weight") != std::string::npos) {
        EXPECT_GT(sum(abs(sub(zero::zero_param(mp.param)->master, masters_before[i]))).item(), 0.0)
            << mp.name << ": the fp32 master was updated";
      }
      ++i;
    }
  });
}

TEST(MixedPrecisionApp, WeightDecayExclusionsAndParamGroupsFromYamlReachTheOptimizer) {
  const config::AppConfig cfg = config_with(
      {"bf16={enabled: true}", "train.weight_decay=0.1", "train.weight_decay_1d=false",
       "train.no_weight_decay=['quantize.*']",
       "train.param_groups=[{params: ['decoder.conv_out.*'], lr_scale: 0.5, weight_decay: 0.2}]"});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    EngineRun r = build(cfg, comm);
    std::map<std::string, int64_t> dims;
    for (const auto& [name, p] : r.model->named_parameters()) dims[name] = p.dim();
    int decaying = 0, spared = 0, grouped = 0;
    for (const auto& [name, shard] : r.engine->optimizer().params()) {
      const optim::ParamSettings& s = r.engine->optimizer().settings(name);
      if (name.rfind("decoder.conv_out.", 0) == 0) {
        EXPECT_EQ(s.lr_scale, 0.5) << name;
        EXPECT_EQ(s.weight_decay, 0.2) << name;
        ++grouped;
        continue;
      }
      const bool expected = dims.at(name) >= 2 && name.rfind("quantize.", 0) != 0;
      EXPECT_EQ(s.lr_scale, 1.0) << name;
      EXPECT_EQ(s.weight_decay, expected ? 0.1 : 0.0) << name;
      ++(expected ? decaying : spared);
    }
    EXPECT_GT(decaying, 0);
    EXPECT_GT(spared, 0);
    EXPECT_EQ(grouped, 2) << "decoder.conv_out.weight and .bias";
  });
}

TEST(MixedPrecisionApp, Fp16FromYamlScalesTheLossDynamically) {
  const config::AppConfig cfg = config_with(
      {"fp16={enabled: true, initial_scale_power: 10, loss_scale_window: 2, hysteresis: 1}",
       "train.lr=1e-4"});
  ASSERT_TRUE(cfg.zero.precision.fp16);
  EXPECT_EQ(cfg.train.dtype, "f16");
  comm::run_threads(2, [&](comm::Communicator& comm) {
    EngineRun r = build(cfg, comm);
    for (const auto& mp : r.engine->partitioned()) {
      EXPECT_EQ(mp.param.dtype(), DType::f16) << mp.name;
      EXPECT_EQ(zero::zero_param(mp.param)->master.dtype(), DType::f32) << mp.name;
    }
    EXPECT_EQ(r.engine->loss_scale(), 1024.0) << "starts at 2^initial_scale_power";
    EXPECT_TRUE(step(r, 0).second);
    EXPECT_EQ(r.engine->loss_scale(), 1024.0) << "one good step: below loss_scale_window";
    EXPECT_TRUE(step(r, 1).second);
    EXPECT_EQ(r.engine->loss_scale(), 1024.0) << "two good steps: DeepSpeed waits one more";
    EXPECT_TRUE(step(r, 2).second);
    EXPECT_EQ(r.engine->loss_scale(), 2048.0) << "doubled after loss_scale_window + 1 good steps";
    std::vector<Tensor> before;
    for (const auto& mp : r.engine->partitioned())
      before.push_back(zero::zero_param(mp.param)->master.clone());
    EXPECT_FALSE(step(r, 3, 1e12).second) << "an overflowing step is skipped";
    EXPECT_EQ(r.engine->loss_scale(), 1024.0) << "halved after the overflow (hysteresis 1)";
    EXPECT_EQ(r.engine->stats().overflow_skips, 1);
    size_t i = 0;
    for (const auto& mp : r.engine->partitioned())
      EXPECT_CLOSE(zero::zero_param(mp.param)->master, before[i++], 0, 0)
          << mp.name << ": untouched by the skipped step";
    EXPECT_TRUE(step(r, 4).second) << "training continues at the lower scale";
  });
}

TEST(MixedPrecisionApp, Emu3ConfigTrainsAStepInBf16) {
  const std::string out = fresh_dir("emu3");
  // The released tokenizer's config unchanged on disk; --set shrinks model, data and run.
  const config::AppConfig cfg =
      config::load_app_config(std::string(ZT_SOURCE_DIR) + "/configs/emu3_vision_tokenizer.yaml",
                              {"model.ch=32",
                               "model.ch_mult=[1, 1, 1, 1]",
                               "model.num_res_blocks=1",
                               "model.codebook_size=64",
                               "data.kind=synthetic",
                               "data.height=16",
                               "data.width=16",
                               "data.num_samples=8",
                               "data.eval_samples=2",
                               "data.workers=1",
                               "data.prefetch=1",
                               "train.steps=1",
                               "train.batch=1",
                               "train.device=cpu",
                               "train.log_every=1",
                               "train.eval_every=0",
                               "train.checkpoint_every=1",
                               "train.warmup=0",
                               "zero_optimization.reduce_bucket_size=100000",
                               "output_dir=" + out},
                              config::App::vqtok);
  EXPECT_TRUE(cfg.zero.precision.bf16) << "train.dtype: bf16 enables bf16";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    const vqtok::TrainResult r = vqtok::train(cfg, o, comm);
    EXPECT_EQ(r.steps, 1);
    ASSERT_EQ(r.log_losses.size(), 1u);
    EXPECT_TRUE(std::isfinite(r.log_losses[0]));
    ASSERT_FALSE(r.final_checkpoint.empty());
    // It trained in bf16: the rank's parameter shards are bf16 beside f32 masters, and
    // nothing else in the file is.
    const auto dt = dtypes_in(r.final_checkpoint, "rank_00000.safetensors");
    EXPECT_GT(dt.count("param/ bf16") ? dt.at("param/ bf16") : 0, 0);
    EXPECT_EQ(dt.count("param/ bf16") ? dt.at("param/ bf16") : -1,
              dt.count("master/ f32") ? dt.at("master/ f32") : -2);
    EXPECT_EQ(dt.count("param/ f32") + dt.count("master/ bf16"), 0u);
    // The bf16 run's checkpoint loads back for inference as a whole f32 model, with the
    // fp32 masters' values, as its export holds them (not the rounded bf16 storage).
    std::shared_ptr<vq::VqModel> frozen = vqtok::load_frozen_model(cfg, r.final_checkpoint, comm);
    for (const auto& [name, p] : frozen->named_parameters())
      EXPECT_EQ(p.dtype(), DType::f32) << name;
    const std::string exported = out + "/export.safetensors";
    vqtok::export_model(cfg, r.final_checkpoint, exported, comm, /*quiet=*/true);
    std::shared_ptr<vq::VqModel> from_export = vqtok::load_frozen_model(cfg, exported, comm);
    const auto a = nn::state_dict(*frozen), b = nn::state_dict(*from_export);
    ASSERT_EQ(a.size(), b.size());
    int64_t unrounded = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(zero::tensor_hash(a[i].second), zero::tensor_hash(b[i].second)) << a[i].first;
      if (a[i].second.dtype() == DType::f32)
        unrounded += zero::tensor_hash(a[i].second) !=
                     zero::tensor_hash(a[i].second.to(DType::bf16).to(DType::f32));
    }
    EXPECT_GT(unrounded, 0) << "every tensor holds bf16 values: the masters were not read";
  });
  EXPECT_TRUE(fs::exists(out + "/metrics.jsonl"));
  fs::remove_all(out);
}

TEST(MixedPrecisionApp, VqtokRestartsDeadCodesOfABf16Codebook) {
  // The dead-code restart edits the gathered bf16 codebook (its noise is drawn in f32).
  const std::string out = fresh_dir("restart");
  const config::AppConfig cfg = config_with(
      {"train.dtype=bf16", "train.steps=2", "train.codebook_restart_every=1", "train.log_every=1",
       "train.eval_every=0", "train.checkpoint_every=0", "output_dir=" + out});
  ASSERT_TRUE(cfg.zero.precision.bf16);
  std::vector<vqtok::TrainResult> runs(2);  // per rank
  ::testing::internal::CaptureStdout();     // rank 0 reports each restart
  comm::run_threads(2, [&](comm::Communicator& comm) {
    runs[static_cast<size_t>(comm.rank())] = vqtok::train(cfg, {}, comm);
  });
  const std::string printed = ::testing::internal::GetCapturedStdout();
  const std::string said = "codebook: restarted ";
  const size_t at = printed.find(said);
  ASSERT_NE(at, std::string::npos) << printed;
  EXPECT_GT(std::stoi(printed.substr(at + said.size())), 0) << printed;
  for (const vqtok::TrainResult& r : runs) {
    EXPECT_EQ(r.steps, 2) << "trained on past the restart after step 1";
    EXPECT_EQ(r.log_losses.size(), 2u);
    for (double l : r.log_losses) EXPECT_TRUE(std::isfinite(l));
  }
  fs::remove_all(out);
}

TEST(MixedPrecisionApp, VqgptTrainsTheGptInBf16BesideAnF32Tokenizer) {
  // The frozen tokenizer is replicated and stays f32; the partitioned GPT computes in bf16.
  const std::string out = fresh_dir("vqgpt");
  config::Node root = config::parse_yaml(R"(
model: {codebook_size: 64, ch: 32, ch_mult: [1, 2], num_res_blocks: 1, attn_resolutions: []}
gpt: {n_layer: 1, n_head: 2, n_embd: 32, tokenizer_checkpoint: none}
data: {kind: synthetic, frames: 4, height: 8, width: 8, num_samples: 64, eval_samples: 4}
train: {steps: 3, batch: 4, lr: 3.0e-3, schedule: constant, log_every: 1, eval_every: 0,
        checkpoint_every: 3, dtype: bf16}
replicated: [tokenizer]
output_dir: unset
)",
                                         "test_vqgpt_bf16");
  config::apply_override(root, "output_dir=" + out);
  const config::AppConfig cfg = config::parse_app_config(root, config::App::vqgpt);
  fs::create_directories(out);
  const std::string weights = out + "/tokenizer.safetensors";
  for (const vqgpt::TrainResult& r : apptest::train_vqgpt_with_fresh_tokenizer(cfg, weights)) {
    EXPECT_EQ(r.steps, 3);
    ASSERT_EQ(r.log_losses.size(), 3u);
    for (double l : r.log_losses) EXPECT_TRUE(std::isfinite(l));
    ASSERT_FALSE(r.final_checkpoint.empty());
    // The GPT's shards are bf16 (f32 masters beside them); the tokenizer, replicated, is
    // saved whole in f32 with no 16-bit tensor anywhere.
    const auto shards = dtypes_in(r.final_checkpoint, "rank_00000.safetensors");
    EXPECT_GT(shards.count("param/ bf16") ? shards.at("param/ bf16") : 0, 0);
    EXPECT_EQ(shards.count("param/ f32"), 0u);
    const auto reps = dtypes_in(r.final_checkpoint, "replicated.safetensors");
    EXPECT_GT(reps.count("param/ f32") ? reps.at("param/ f32") : 0, 0);
    EXPECT_EQ(reps.count("param/ bf16"), 0u);
  }
  fs::remove_all(out);
}

// An fp16 vqgpt run whose every update overflows verifies the tokenizer's replicas once,
// when its engine is built: buffers.verify_every counts applied updates, and a skipped step
// leaves the applied count at 0, a multiple of every verify_every. Neither the log nor the
// result claims a check at those steps.
TEST(MixedPrecisionApp, VqgptClaimsNoReplicaCheckAtASkippedFp16Step) {
  const std::string out = fresh_dir("vqgpt_fp16_verify");
  fs::create_directories(out);
  const std::string weights = out + "/tokenizer.safetensors";
  const config::AppConfig cfg = vqgpt_test::tiny_config(
      out + "/run", "",
      {"train.steps=3", "train.log_every=1", "train.checkpoint_every=0", "buffers.verify_every=1",
       "fp16={enabled: true, initial_scale_power: 40}"});
  nn::save_safetensors(weights, vqgpt_test::pretrained_tokenizer(cfg));
  std::vector<vqgpt::TrainResult> results(2);
  ::testing::internal::CaptureStdout();  // rank 0's log
  ::testing::internal::CaptureStderr();  // and its overflow notes
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqgpt::TrainOptions o;
    o.tokenizer = weights;
    results[static_cast<size_t>(comm.rank())] = vqgpt::train(cfg, o, comm);
  });
  const std::string printed = ::testing::internal::GetCapturedStdout();
  const std::string said = ::testing::internal::GetCapturedStderr();
  for (const char* step : {"step 1:", "step 2:", "step 3:"})
    ASSERT_NE(said.find(std::string("fp16 gradient overflow at ") + step + " update skipped"),
              std::string::npos)
        << said;
  for (const vqgpt::TrainResult& r : results) {
    EXPECT_EQ(r.steps, 3);
    EXPECT_EQ(r.replica_checks, 1) << "the engine verified at start only";
  }
  EXPECT_EQ(printed.find("tokenizer replicas verified ("), std::string::npos) << printed;
  fs::remove_all(out);
}

// An fp16 run counts the steps it ran, also those an overflow skipped (the first ones at
// the default scale of 2^16 are): the run's end says the step its checkpoints are named by.
TEST(MixedPrecisionApp, AnFp16RunReportsTheStepsItRanNotTheUpdatesApplied) {
  const std::string out = fresh_dir("fp16steps");
  const config::AppConfig cfg =
      config_with({"train.dtype=f16", "train.steps=3", "train.log_every=1", "train.eval_every=0",
                   "train.checkpoint_every=3", "output_dir=" + out});
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    const vqtok::TrainResult r = vqtok::train(cfg, o, comm);
    EXPECT_EQ(r.steps, 3);
    EXPECT_EQ(fs::path(r.final_checkpoint).filename().string(), "step_000003");
  });
  fs::remove_all(out);
}

// The learning rate counts the updates applied, as DeepSpeed's scheduler does: a step an
// fp16 overflow skipped (the first ones, at the starting scale of 2^16) leaves the warmup
// where it was, so each step's rate is that of the updates before it, not of its number.
TEST(MixedPrecisionApp, AnFp16RunsWarmupHoldsAtTheStepsItSkipped) {
  const std::string out = fresh_dir("fp16warmup");
  const config::AppConfig cfg =
      config_with({"train.dtype=f16", "train.steps=4", "train.warmup=4", "train.log_every=1",
                   "train.eval_every=0", "train.checkpoint_every=0", "output_dir=" + out});
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    vqtok::train(cfg, o, comm);
  });
  const std::vector<nlohmann::json> log = app::read_metrics(out + "/metrics.jsonl");
  ASSERT_EQ(log.size(), 4u);
  ASSERT_GT(log[2].value("skipped_steps", 0), 0) << "no step before the last was skipped";
  const app::LrPlan plan(cfg.train);
  int64_t skipped_before = 0;
  for (const nlohmann::json& r : log) {
    const int64_t step = r.value("step", int64_t{0});
    EXPECT_DOUBLE_EQ(r.value("lr", -1.0), plan.lr_at(step - 1 - skipped_before)) << "step " << step;
    skipped_before = r.value("skipped_steps", int64_t{0});
  }
  fs::remove_all(out);
}

// Cosine codes (model.l2_norm_codes) in fp16: a codebook of K rows starts with rows of
// length at most 2 sqrt(E) / K, whose normalization's gradient overflowed f16 at any
// loss scale (x^-3/2 of the squared length), so no update was ever applied. Normalized in
// f32, every step at a fixed scale of 1 applies its update.
TEST(MixedPrecisionApp, CosineCodesTrainInFp16) {
  const std::string out = fresh_dir("cosine16");
  const config::AppConfig cfg =
      config_with({"model.codebook_size=256", "model.l2_norm_codes=true", "train.dtype=f16",
                   "fp16.loss_scale=1", "train.steps=3", "train.log_every=1", "train.eval_every=0",
                   "train.checkpoint_every=0", "output_dir=" + out});
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    vqtok::train(cfg, o, comm);
  });
  const std::vector<nlohmann::json> log = app::read_metrics(out + "/metrics.jsonl");
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().value("step", 0), 3);
  EXPECT_EQ(log.back().value("skipped_steps", -1), 0);
  EXPECT_TRUE(std::isfinite(log.back().value("loss", NAN)));
  fs::remove_all(out);
}

// A quiet run prints nothing (TrainOptions::quiet), the engine's notes included: the fp16
// overflows of its first steps (the scale starts at 2^16), where offload_optimizer keeps
// the state, and the timeline it wrote. The same run without quiet prints each of them, so
// the capture would see them.
TEST(MixedPrecisionApp, AQuietFp16RunPrintsNothingNotEvenTheEnginesNotes) {
  auto run = [](const std::string& out, bool quiet) {
    const config::AppConfig cfg =
        config_with({"train.dtype=f16", "train.steps=3", "train.log_every=1", "train.eval_every=0",
                     "train.checkpoint_every=0", "zero_optimization.offload_optimizer.device=cpu",
                     "train.trace=" + out + "/trace.json", "output_dir=" + out});
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    comm::run_threads(2, [&](comm::Communicator& comm) {
      vqtok::TrainOptions o;
      o.quiet = quiet;
      vqtok::train(cfg, o, comm);
    });
    std::string printed = ::testing::internal::GetCapturedStdout();
    printed += ::testing::internal::GetCapturedStderr();
    const std::vector<nlohmann::json> log = app::read_metrics(out + "/metrics.jsonl");
    EXPECT_GT(log.empty() ? 0 : log.back().value("skipped_steps", 0), 0) << "no overflow";
    EXPECT_TRUE(fs::exists(out + "/trace.json"));
    fs::remove_all(out);
    return printed;
  };
  const std::string loud = run(fresh_dir("loud"), false);
  EXPECT_NE(loud.find("zt: fp16 gradient overflow at step 1: update skipped"), std::string::npos)
      << loud;
  EXPECT_NE(loud.find("zt: offload_optimizer: optimizer state on cpu"), std::string::npos) << loud;
  EXPECT_NE(loud.find("zt: timeline of "), std::string::npos) << loud;
  EXPECT_EQ(run(fresh_dir("quiet"), true), "");
}
