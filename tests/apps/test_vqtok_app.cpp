// The vqtok application (apps/vqtok/vqtok_app.h, train_util.h) on thread ranks, at a
// width that trains in seconds (ch 32, ch_mult [1, 1, 1, 1], 16x16 clips of 4 frames,
// 64 codes). What these tests pin down:
//  1. a short ZeRO-3 run on 2 ranks lowers the loss and writes metrics.jsonl, curves.svg,
//     the reconstruction grid and checkpoints; --resume continues from the latest one;
//  2. export writes every state-dict key (BatchNorm buffers included) in fp32, and the
//     file loads into a plain model that computes what the checkpoint computes;
//  3. encode on 2 ranks: every rank produces identical tokens (--verify) and the same
//     ids as 1 rank; decode and eval run on them; one-frame clips encode as training
//     encodes them, and an image folder's list names the file each row was read from;
//  4. the helpers: PSNR, the learning-rate plan, codebook usage reduced across ranks;
//  5. errors name what is missing (weights, checkpoint).
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "apps/app_test_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "configs/config.h"
#include "core/algo_policy.h"
#include "core/cuda/flash_shapes.h"
#include "data/factory.h"
#include "data/image.h"
#include "data/npy.h"
#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/checkpoint.h"
#include "zero/gathered.h"
#include "zero/replicas.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

// The shared tiny config.
config::AppConfig tiny_config(const std::string& out_dir, std::vector<std::string> sets = {}) {
  return apptest::tiny_vqtok_config(out_dir, std::move(sets));
}

std::string fresh_dir(const std::string& name) {
  return apptest::fresh_dir("zt_vqtok", name);
}

// One 2-rank training run shared by the tests that need trained weights (its folder
// removed when the test process exits).
struct Trained {
  config::AppConfig cfg;
  vqtok::TrainResult result[2];
};

const Trained& trained() {
  static Trained* t = [] {
    auto* t = new Trained{tiny_config(fresh_dir("train")), {}};
    std::atexit([] { fs::remove_all(trained().cfg.output_dir); });
    comm::run_threads(2, [&](comm::Communicator& comm) {
      vqtok::TrainOptions o;
      o.quiet = true;
      t->result[comm.rank()] = vqtok::train(t->cfg, o, comm);
    });
    return t;
  }();
  return *t;
}

// cfg's tokenizer freshly initialized (seed 5), saved to `path`; the model, in eval mode.
std::shared_ptr<vq::VqModel> random_weights(const config::AppConfig& cfg, const std::string& path) {
  manual_seed(5);
  auto tok = std::make_shared<vq::VqModel>(cfg.model);
  fs::create_directories(fs::path(path).parent_path());
  nn::save_safetensors(path, nn::state_dict(*tok));
  tok->eval();
  return tok;
}

std::vector<nlohmann::json> records(const std::string& dir, const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (auto& r : app::read_metrics(dir + "/metrics.jsonl"))
    if (r.value("kind", "") == kind) out.push_back(r);
  return out;
}

}  // namespace

TEST(VqtokApp, TrainingOnTwoRanksLowersTheLoss) {
  const Trained& t = trained();
  const vqtok::TrainResult& r = t.result[0];
  ASSERT_EQ(r.steps, 8);
  ASSERT_EQ(r.log_losses.size(), 8u);
  // Both ranks report the same (globally reduced) numbers.
  EXPECT_EQ(t.result[1].log_losses, r.log_losses);
  const double first = (r.log_losses[0] + r.log_losses[1]) / 2;
  const double last = (r.log_losses[6] + r.log_losses[7]) / 2;
  EXPECT_LT(last, 0.8 * first) << "loss " << first << " -> " << last;
  EXPECT_GT(r.log_psnr.back(), r.log_psnr.front());
  EXPECT_GT(r.codebook.used, 0);
  EXPECT_LE(r.codebook.usage, 1.0);

  const std::string dir = t.cfg.output_dir;
  auto train = records(dir, "train");
  ASSERT_EQ(train.size(), 8u);
  for (const char* key :
       {"loss", "mse", "l1", "vq", "psnr", "codebook_usage", "lr", "step_time", "eta_s", "memory"})
    EXPECT_TRUE(train[0].contains(key)) << "metrics record lacks " << key;
  EXPECT_EQ(records(dir, "eval").size(), 1u);
  EXPECT_TRUE(fs::exists(dir + "/curves.svg"));
  EXPECT_TRUE(fs::exists(dir + "/recon_step_000008.png"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_000004/meta.json"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_000008/meta.json"));
  EXPECT_EQ(r.final_checkpoint, vqtok::checkpoint_root(t.cfg) + "/step_000008");
}

TEST(VqtokApp, ResumeContinuesFromTheLatestCheckpoint) {
  const std::string dir = fresh_dir("resume");
  auto first =
      tiny_config(dir, {"train.steps=2", "train.checkpoint_every=2", "train.eval_every=0"});
  auto second =
      tiny_config(dir, {"train.steps=3", "train.checkpoint_every=2", "train.eval_every=0"});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    vqtok::train(first, o, comm);
    o.resume = true;
    vqtok::TrainResult r = vqtok::train(second, o, comm);
    EXPECT_EQ(r.start_step, 2);
    EXPECT_EQ(r.steps, 3);
  });
  auto train = records(dir, "train");
  ASSERT_EQ(train.size(), 3u);
  EXPECT_EQ(train[2]["step"].get<int64_t>(), 3);
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_000003/meta.json"));
  fs::remove_all(dir);
}

TEST(VqtokApp, ExportHasEveryKeyInFp32AndLoadsIntoAPlainModel) {
  const Trained& t = trained();
  const std::string out = t.cfg.output_dir + "/export/model.safetensors";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::export_model(t.cfg, vqtok::checkpoint_root(t.cfg), out, comm, /*quiet=*/true);
  });
  auto dict = nn::load_safetensors(out);
  auto expected = vq::VqModel::expected_keys(t.cfg.model);
  ASSERT_EQ(dict.size(), expected.size());
  // transformers' from_pretrained reads a safetensors file only with format pt (tf, flax).
  EXPECT_EQ(nn::SafetensorsFile(out).metadata().at("format"), "pt");
  EXPECT_EQ(nn::SafetensorsFile(out).metadata().at("step"), std::to_string(t.cfg.train.steps));
  std::map<std::string, Tensor> by_name(dict.begin(), dict.end());
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(by_name.count(name)) << "export lacks " << name;
    EXPECT_EQ(by_name[name].sizes(), shape) << name;
    if (name.find("num_batches_tracked") == std::string::npos) {
      EXPECT_EQ(by_name[name].dtype(), DType::f32) << name;
    }
  }
  // BatchNorm statistics were trained: not the initial (0, 1).
  EXPECT_NE(by_name["encoder.time_res_stack.0.norm1.running_var"].to_vector(),
            std::vector<double>(4, 1.0));

  // A plain model loaded from the file computes what the checkpoint's replica computes.
  manual_seed(3);
  vq::VqModel plain(t.cfg.model);
  nn::load_state_dict(plain, dict, /*strict=*/true);
  plain.eval();
  Tensor x = rand({2, 4, 3, 16, 16}) * 2.0 - 1.0;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto from_ckpt = vqtok::load_frozen_model(t.cfg, "", comm);
    auto from_file = vqtok::load_frozen_model(t.cfg, out, comm);
    autograd::NoGradGuard ng;
    Tensor a = plain.call({x})[0], b = from_ckpt->call({x})[0], c = from_file->call({x})[0];
    EXPECT_CLOSE(b, a, 1e-5, 1e-6);
    EXPECT_CLOSE(c, a, 1e-5, 1e-6);
  });
}

// eval, encode and export read a checkpoint's model, not its optimizer state: a run
// trained with SGD evaluates and exports under a config that names AdamW. The VQ term eval
// reports is the training objective's, at the config's loss.commitment.
TEST(VqtokApp, InferenceReadsAnyOptimizersCheckpointAndWeighsTheVqTermAsTraining) {
  const std::string dir = fresh_dir("sgd");
  auto sgd = tiny_config(dir, {"train.steps=1", "train.optimizer=sgd", "train.momentum=0.9",
                               "train.checkpoint_every=1", "train.eval_every=0"});
  auto adamw = tiny_config(dir, {"train.optimizer=adamw"});
  auto commit1 = tiny_config(dir, {"train.optimizer=adamw", "loss.commitment=1.0"});
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    vqtok::train(sgd, o, comm);
    vqtok::export_model(adamw, "", dir + "/model.safetensors", comm, /*quiet=*/true);
    vqtok::EvalOptions e;
    e.batches = 1;
    const vqtok::EvalResult at_quarter = vqtok::evaluate(adamw, e, comm);
    const vqtok::EvalResult at_one = vqtok::evaluate(commit1, e, comm);
    // Both terms have the value mean((zq - z)^2): codebook + c x commit = (1 + c) x it.
    EXPECT_GT(at_quarter.loss_vq, 0.0);
    EXPECT_NEAR(at_one.loss_vq / at_quarter.loss_vq, 2.0 / 1.25, 1e-6);
    EXPECT_EQ(at_one.mse, at_quarter.mse);
  });
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  fs::remove_all(dir);
}

// eval --batches K scores K batches of clips spread over the split, not its first ones
// (there the first class folder): of a/0 a/1 b/0 b/1, one batch of two is a/0 and b/0,
// scored exactly as a folder of those two.
TEST(VqtokApp, EvalOfSomeBatchesScoresClipsSpreadOverTheSplit) {
  const Trained& t = trained();
  const std::string dir = fresh_dir("spread");
  uint8_t seed = 0;
  for (const std::string f : {"a/0", "a/1", "b/0", "b/1"}) {
    std::vector<uint8_t> px(16 * 16 * 3);
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 37 + seed * 101);
    ++seed;
    fs::create_directories(dir + "/all/" + f.substr(0, 1));
    data::save_png(dir + "/all/" + f + ".png", data::Image{16, 16, px});
  }
  for (const std::string f : {"a/0", "b/0"}) {
    fs::create_directories(dir + "/mix/" + f.substr(0, 1));
    fs::copy_file(dir + "/all/" + f + ".png", dir + "/mix/" + f + ".png");
  }
  auto folder = [&](const std::string& path) {
    return tiny_config(t.cfg.output_dir, {"data.kind=image_folder", "data.path=" + path});
  };
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqtok::EvalOptions some;
    some.eval_split = false;
    some.batches = 1;
    some.batch = 2;
    vqtok::EvalOptions all = some;
    all.batches = 0;
    const vqtok::EvalResult spread = vqtok::evaluate(folder(dir + "/all"), some, comm);
    const vqtok::EvalResult mix = vqtok::evaluate(folder(dir + "/mix"), all, comm);
    EXPECT_EQ(spread.clips, 2);
    EXPECT_EQ(spread.mse, mix.mse);
  });
  fs::remove_all(dir);
}

// A folder of images of any aspect ratio encodes at the config's size (cropped to the
// middle), and a list beside the codes says which file each row is.
TEST(VqtokApp, EncodingAFolderListsTheFileOfEachRow) {
  const Trained& t = trained();
  const std::string dir = fresh_dir("folder");
  fs::create_directories(dir + "/imgs");
  auto grey = [](int64_t h, int64_t w) {
    return data::Image{h, w, std::vector<uint8_t>(static_cast<size_t>(h * w * 3), 100)};
  };
  data::save_png(dir + "/imgs/wide.png", grey(16, 40));
  data::save_png(dir + "/imgs/tall.png", grey(30, 16));
  data::save_png(dir + "/imgs/b_square.png", grey(16, 16));
  data::save_png(dir + "/imgs/new\nline.png", grey(16, 16));  // listed quoted, on one line
  std::ofstream(dir + "/imgs/._wide.png") << "macOS metadata";
  vqtok::EncodeOptions o;
  o.input = dir + "/imgs";
  o.out = dir + "/codes.npy";
  o.quiet = true;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    EXPECT_FALSE(vqtok::encode(t.cfg, o, comm).codes.defined()) << "written, not kept";
  });
  EXPECT_EQ(data::load_npy(o.out).sizes(), (Shape{4, 2, 2}));
  std::ifstream list(o.out + ".files.txt");
  std::vector<std::string> rows;
  for (std::string l; std::getline(list, l);) rows.push_back(l);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1], "\"" + dir + "/imgs/new\\nline.png\"");
  rows.erase(rows.begin() + 1);
  for (std::string& r : rows) r = fs::path(r).filename().string();
  EXPECT_EQ(rows, (std::vector<std::string>{"b_square.png", "tall.png", "wide.png"}));
  // Codes of an array (no files) over the same name leave no list from before.
  data::save_npy(dir + "/imgs.npy", zeros({2, 3, 16, 16}));
  o.input = dir + "/imgs.npy";
  apptest::encode_on_one_rank(t.cfg, o);
  EXPECT_FALSE(fs::exists(o.out + ".files.txt"));
  fs::remove_all(dir);
}

// With data.on_bad_image: skip, a file that does not decode is read as the next one: the
// list names the file each row's codes were read from.
TEST(VqtokApp, TheFileListNamesTheImageReadInABadOnesPlace) {
  const std::string dir = fresh_dir("bad_image");
  auto cfg = tiny_config(dir, {"data.on_bad_image=skip"});
  const std::string weights = dir + "/tok.safetensors";
  random_weights(cfg, weights);
  const data::Image grey{16, 16, std::vector<uint8_t>(16 * 16 * 3, 100)};
  fs::create_directories(dir + "/imgs");
  const std::vector<uint8_t> png = data::encode_png(grey);  // cut after its header
  std::ofstream(dir + "/imgs/a.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(png.data()), 40);
  data::save_png(dir + "/imgs/b.png", grey);
  data::save_png(dir + "/imgs/c.png", grey);
  vqtok::EncodeOptions o;
  o.weights = weights;
  o.input = dir + "/imgs";
  o.out = dir + "/codes.npy";
  o.batch = 1;  // two rounds of two batches: the last row comes from the second
  o.quiet = true;
  comm::run_threads(2, [&](comm::Communicator& comm) { vqtok::encode(cfg, o, comm); });
  std::ifstream list(o.out + ".files.txt");
  std::vector<std::string> rows;
  for (std::string l; std::getline(list, l);) rows.push_back(fs::path(l).filename().string());
  EXPECT_EQ(rows, (std::vector<std::string>{"b.png", "b.png", "c.png"}));
  fs::remove_all(dir);
}

// A one-frame clip (data.frames: 1) is an image to the tokenizer, whatever
// model.temporal_downsample_factor: encode gives it the one code frame that training and
// vqgpt give it, from the config's data or an array, and decode gives one frame back.
TEST(VqtokApp, OneFrameClipsEncodeAsTrainingEncodesThem) {
  const std::string dir = fresh_dir("one_frame");
  const auto cfg = tiny_config(dir, {"data.frames=1"});
  ASSERT_EQ(cfg.model.temporal_downsample_factor, 4);
  const std::string weights = dir + "/tok.safetensors";
  auto tok = random_weights(cfg, weights);
  auto eval_set = data::make_dataset(cfg.data, /*eval=*/true);
  std::vector<Tensor> clips;
  for (int64_t i = 0; i < 3; ++i) clips.push_back(eval_set->get(i).clip);
  const Tensor x = stack(clips, 0);  // (3, 1, 3, 16, 16)
  data::save_npy(dir + "/clips.npy", x);
  Tensor want;
  {
    autograd::NoGradGuard ng;
    want = tok->encode_image(x.select(1, 0)).codes;  // as vqgpt tokenizes them
  }
  vqtok::EncodeOptions o;
  o.weights = weights;
  o.limit = 3;
  o.out = dir + "/ids.npy";
  o.quiet = true;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    for (const std::string& input : {std::string(), dir + "/clips.npy"}) {
      o.input = input;
      vqtok::encode(cfg, o, comm);
      const Tensor codes = data::load_npy(o.out);
      ASSERT_EQ(codes.sizes(), (Shape{3, 1, 2, 2})) << input;
      EXPECT_EQ(codes.select(1, 0).contiguous().to_vector(), want.to_vector()) << input;
    }
    vqtok::DecodeOptions d;
    d.weights = weights;
    d.codes = o.out;
    d.quiet = true;
    EXPECT_EQ(vqtok::decode(cfg, d, comm).sizes(), (Shape{3, 1, 3, 16, 16}));
  });
  fs::remove_all(dir);
}

TEST(VqtokApp, EncodeOnTwoRanksGivesIdenticalTokens) {
  const Trained& t = trained();
  const std::string ids = t.cfg.output_dir + "/ids.npy";
  vqtok::EncodeOptions o;
  o.limit = 6;
  o.batch = 2;
  o.quiet = true;
  Tensor one;
  comm::run_threads(1,
                    [&](comm::Communicator& comm) { one = vqtok::encode(t.cfg, o, comm).codes; });
  ASSERT_EQ(one.sizes(), (Shape{6, 1, 2, 2}));
  o.verify = true;
  Tensor per_rank[2];
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::EncodeResult r = vqtok::encode(t.cfg, o, comm);
    ASSERT_EQ(r.verify_hashes.size(), 2u);
    EXPECT_EQ(r.verify_hashes[0], r.verify_hashes[1]);
    per_rank[comm.rank()] = r.codes;
  });
  EXPECT_EQ(per_rank[0].to_vector(), one.to_vector());
  EXPECT_EQ(per_rank[1].to_vector(), one.to_vector());
  // Into a file, a round of 4 batches at a time: the last rank has no batch of the 3; and
  // of 3 batches of one clip, two rounds.
  o.out = ids;
  comm::run_threads(4, [&](comm::Communicator& comm) { vqtok::encode(t.cfg, o, comm); });
  EXPECT_EQ(data::load_npy(ids).to_vector(), one.to_vector());
  o.batch = 1;
  comm::run_threads(3, [&](comm::Communicator& comm) { vqtok::encode(t.cfg, o, comm); });
  Tensor saved = data::load_npy(ids);
  EXPECT_EQ(saved.dtype(), DType::i64);
  EXPECT_EQ(saved.to_vector(), one.to_vector());

  // Decode the ids back to frames, and evaluate on the held-out split.
  vqtok::DecodeOptions d;
  d.codes = ids;
  d.out_dir = t.cfg.output_dir + "/decoded";
  d.quiet = true;
  vqtok::EvalResult on_two;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    Tensor frames = vqtok::decode(t.cfg, d, comm);
    EXPECT_EQ(frames.sizes(), (Shape{6, 4, 3, 16, 16}));
    vqtok::EvalResult e = vqtok::evaluate(t.cfg, {}, comm);
    EXPECT_EQ(e.clips, 8);
    EXPECT_GT(e.psnr, 5.0);
    EXPECT_GT(e.codebook.used, 0);
    if (comm.rank() == 0) on_two = e;
  });
  // On 3 ranks the 8 clips do not split evenly: the sampler pads rank 2 with a repeat of
  // clip 0, alone in its last batch of 2 + 1. The evaluation leaves it out and scores the
  // same 8 clips.
  comm::run_threads(3, [&](comm::Communicator& comm) {
    vqtok::EvalResult e = vqtok::evaluate(t.cfg, {}, comm);
    EXPECT_EQ(e.clips, 8);
    // That clip ran in a batch of one, where the CPU kernels' f32 sums can differ in the
    // last bits from a batch of two's (a BLAS kernel's sums can depend on a product's size).
    EXPECT_NEAR(e.mse, on_two.mse, 1e-6 * on_two.mse);
    EXPECT_NEAR(e.loss_vq, on_two.loss_vq, 1e-6 * on_two.loss_vq);
    EXPECT_EQ(e.codebook.used, on_two.codebook.used);
  });
  // Each clip's sums are its own, added up in dataset order over every rank's clips: at one
  // batch size the scores are the same bits on any number of ranks.
  for (int ranks : {1, 4})
    comm::run_threads(ranks, [&](comm::Communicator& comm) {
      vqtok::EvalResult e = vqtok::evaluate(t.cfg, {}, comm);
      EXPECT_EQ(e.mse, on_two.mse) << ranks << " ranks";
      EXPECT_EQ(e.l1, on_two.l1) << ranks << " ranks";
      EXPECT_EQ(e.loss_vq, on_two.loss_vq) << ranks << " ranks";
    });
  EXPECT_TRUE(fs::exists(d.out_dir + "/clip_000005_frame_03.png"));
  EXPECT_FALSE(fs::exists(d.out_dir + "/clip_000006_frame_00.png"));
  EXPECT_TRUE(fs::exists(d.out_dir + "/grid.png"));

  // Ids the codebook does not have are refused, named as the integers they are.
  Tensor bad = saved.clone();
  bad.view({bad.numel()}).narrow(0, 0, 1).fill_(1234567);
  data::save_npy(ids, bad);
  d.out_dir.clear();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    EXPECT_TRUE(test::throws_with([&] { vqtok::decode(t.cfg, d, comm); },
                                  ", 1234567] but the codebook has"));
  });
}

TEST(VqtokApp, HelpersPsnrLrPlanAndCodebookUsage) {
  EXPECT_NEAR(app::psnr_from_mse(0.04), 20.0, 1e-9);  // 10 log10(4 / 0.04)
  config::TrainConfig tc;
  tc.steps = 10;
  tc.lr = 1.0;
  tc.min_lr = 0.0;
  tc.warmup = 2;
  tc.schedule = config::Schedule::linear;
  app::LrPlan plan(tc);
  EXPECT_NEAR(plan.lr_at(0), 0.5, 1e-12);
  EXPECT_NEAR(plan.lr_at(2), 1.0, 1e-12);
  EXPECT_NEAR(plan.lr_at(6), 0.5, 1e-12);
  tc.schedule = config::Schedule::cosine;
  tc.warmup = 50;  // longer than the run: cut to it (10 steps), not an error
  const app::LrPlan cut(tc);
  EXPECT_NEAR(cut.lr_at(3), 0.4, 1e-12);  // 4 / 10 of the way, not 4 / 50
  EXPECT_NEAR(cut.lr_at(9), 1.0, 1e-12);  // the full rate at the run's last step

  // schedule step after a warmup: StepLR counts from the warmup's end, so the rate is the
  // full one for step_size updates after the warmup before its first decay.
  tc.schedule = config::Schedule::step;
  tc.warmup = 2;
  tc.step_size = 2;
  tc.gamma = 0.5;
  const app::LrPlan step(tc);
  std::vector<double> lrs;
  for (int64_t s = 0; s < 10; ++s) lrs.push_back(step.lr_at(s));
  EXPECT_EQ(lrs, (std::vector<double>{0.5, 1, 1, 1, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125}));
  tc.warmup = 0;  // StepLR from the first update
  const app::LrPlan no_warmup(tc);
  EXPECT_EQ(no_warmup.lr_at(0), 1.0);
  EXPECT_EQ(no_warmup.lr_at(1), 1.0);
  EXPECT_EQ(no_warmup.lr_at(2), 0.5);
  tc.warmup = 50;  // cut to the run's 10 updates: StepLR counts from update 10
  const app::LrPlan long_warmup(tc);
  EXPECT_EQ(long_warmup.lr_at(9), 1.0);
  EXPECT_EQ(long_warmup.lr_at(11), 1.0);
  EXPECT_EQ(long_warmup.lr_at(12), 0.5);

  comm::run_threads(2, [](comm::Communicator& comm) {
    // rank 0 sees codes {0, 1, 1}, rank 1 {2, 1, 1}: 3 of 8 used, p = {1/6, 4/6, 1/6}.
    app::CodebookUsage u(8);
    u.add(from_vector({comm.rank() == 0 ? 0.0 : 2.0, 1, 1}, {3}, DType::i64));
    app::CodebookStats s = u.reduce(comm);
    EXPECT_EQ(s.used, 3);
    EXPECT_EQ(s.tokens, 6);
    EXPECT_NEAR(s.usage, 3.0 / 8.0, 1e-12);
    const double h = -(2.0 / 6.0) * std::log(1.0 / 6.0) - (4.0 / 6.0) * std::log(4.0 / 6.0);
    EXPECT_NEAR(s.perplexity, std::exp(h), 1e-9);
    EXPECT_EQ(u.reduce(comm).used, 0) << "reduce() starts a new window";
    EXPECT_THROW(u.add(from_vector({8}, {1}, DType::i64)), Error);

    app::ScalarWindow w;
    w.add("loss", comm.rank() == 0 ? 1.0 : 3.0);
    w.add("loss", comm.rank() == 0 ? 1.0 : 3.0);
    auto m = w.reduce(comm);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_DOUBLE_EQ(m[0].second, 2.0);
    // A name only some ranks added (the others' micro-batches all skipped, fp16) is the
    // mean over the ranks that did.
    w.add("loss", 4.0);
    if (comm.rank() == 1) w.add("mse", 0.5);
    m = w.reduce(comm);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0], (std::pair<std::string, double>{"loss", 4.0}));
    EXPECT_EQ(m[1], (std::pair<std::string, double>{"mse", 0.5}));
  });
}

TEST(VqtokApp, MissingWeightsAndCheckpointsAreNamed) {
  auto cfg = tiny_config(fresh_dir("missing"));
  comm::run_threads(1, [&](comm::Communicator& comm) {
    try {
      vqtok::load_frozen_model(cfg, "", comm);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--weights"), std::string::npos) << e.what();
    }
    try {
      vqtok::export_model(cfg, cfg.output_dir + "/nowhere", cfg.output_dir + "/m.safetensors", comm,
                          true);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no checkpoint"), std::string::npos) << e.what();
    }
  });
}

// The model starts identical on every rank (one seed, then the engine's broadcast), but
// dropout draws from each rank's own stream, as each rank's data differs.
TEST(VqtokApp, DropoutStreamsDifferPerRankAfterAnIdenticalBuild) {
  const auto cfg = tiny_config(fresh_dir("dropout"), {"model.dropout=0.1"});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto model = vqtok::build_model(cfg, Device::cpu(), comm);
    const double draw = rand({1}).item();
    const std::vector<double> draws = comm.all_gather_object(draw);
    EXPECT_NE(draws[0], draws[1]) << "dropout masks would repeat on every rank";
    zero::GatheredParameters all(*model, comm);
    const Tensor w = model->named_parameters().front().second;
    const auto hashes = comm.all_gather_object(zero::tensor_hash(w));
    EXPECT_EQ(hashes[0], hashes[1]) << "the model itself is the same on every rank";
  });
}

TEST(VqtokApp, TrainDeviceRule) {
  // cpu runs anywhere, in any train.dtype (bf16 / f16 are the mixed-precision sections);
  // cuda needs a CUDA build and a GPU, and then one rank per process (NCCL) or one thread
  // rank. Which cuda error this machine gives depends on the build and the hardware.
  auto expect_error = [](const config::AppConfig& cfg, int ranks, const std::string& phrase) {
    comm::run_threads(ranks, [&](comm::Communicator& comm) {
      EXPECT_TRUE(
          test::throws_with([&] { app::train_device(cfg.train, comm, "vqtok train"); }, phrase));
    });
  };
  comm::run_threads(2, [&](comm::Communicator& comm) {
    EXPECT_TRUE(app::train_device(tiny_config(fresh_dir("dev")).train, comm, "t").is_cpu());
  });
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const auto bf16 = tiny_config(fresh_dir("dev"), {"train.dtype=bf16"});
    EXPECT_TRUE(app::train_device(bf16.train, comm, "t").is_cpu());
  });
  // train.attention sets the process's attention kernels; unset, it leaves them.
  const AttentionKernel before = attention_kernel();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    app::train_device(tiny_config(fresh_dir("dev"), {"train.attention=math"}).train, comm, "t");
    EXPECT_EQ(attention_kernel(), AttentionKernel::math);
    set_attention_kernel(AttentionKernel::flash);
    app::train_device(tiny_config(fresh_dir("dev")).train, comm, "t");
    EXPECT_EQ(attention_kernel(), AttentionKernel::flash);
  });
  set_attention_kernel(before);
  // train.flash_backward likewise sets the fused backward's way to dq.
  const flash::Backward way = flash::backward();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    app::train_device(tiny_config(fresh_dir("dev"), {"train.flash_backward=atomic"}).train, comm,
                      "t");
    EXPECT_EQ(flash::backward(), flash::Backward::atomic);
    app::train_device(tiny_config(fresh_dir("dev")).train, comm, "t");
    EXPECT_EQ(flash::backward(), flash::Backward::atomic) << "unset: the process's choice stays";
  });
  flash::set_backward(way);
  // train.gemm_benchmark likewise sets how CUDA GEMMs pick their algorithms.
  const bool timed = gemm_benchmark();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    app::train_device(tiny_config(fresh_dir("dev"), {"train.gemm_benchmark=true"}).train, comm,
                      "t");
    EXPECT_TRUE(gemm_benchmark());
    app::train_device(tiny_config(fresh_dir("dev")).train, comm, "t");
    EXPECT_TRUE(gemm_benchmark()) << "unset: the process's choice stays";
    app::train_device(tiny_config(fresh_dir("dev"), {"train.gemm_benchmark=false"}).train, comm,
                      "t");
    EXPECT_FALSE(gemm_benchmark());
  });
  set_gemm_benchmark(timed);
  // Without a GPU, train.device=cuda names why (with one, TrainDeviceRuleOnTheGpu).
  const auto cuda = tiny_config(fresh_dir("dev"), {"train.device=cuda"});
#ifndef ZT_WITH_CUDA
  expect_error(cuda, 1, "needs a CUDA build");
#else
  if (!cuda_available()) expect_error(cuda, 1, "no GPU is visible");
#endif
}
