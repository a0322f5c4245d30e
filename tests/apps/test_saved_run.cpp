// What a checkpoint records of its run (meta.json: the app, the config) and the check
// that reads it (apps/common/saved_run.h): a checkpoint of the other app is named as such,
// by every loader of each app.
#include <filesystem>

#include "apps/app_test_util.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "configs/config.h"
#include "zero/checkpoint.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

using test::error_of;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The tiny vqtok config at 2 steps, a checkpoint at step 2, no eval.
config::AppConfig vqtok_config(const std::string& out, std::vector<std::string> sets = {}) {
  sets.insert(sets.begin(), {"train.steps=2", "train.eval_every=0", "train.checkpoint_every=2"});
  return apptest::tiny_vqtok_config(out, std::move(sets));
}

vqtok::TrainResult train_vqtok(const config::AppConfig& cfg, bool resume) {
  vqtok::TrainResult out;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vqtok::TrainOptions o;
    o.quiet = true;
    o.resume = resume;
    vqtok::TrainResult r = vqtok::train(cfg, o, comm);
    if (comm.rank() == 0) out = r;
  });
  return out;
}

// A vqgpt config over a tokenizer of the tiny model's shape: one step, checkpointed.
config::AppConfig vqgpt_config(const std::string& out, std::vector<std::string> sets = {}) {
  config::Node root = config::parse_yaml(R"(
model: {codebook_size: 64, ch: 32, ch_mult: [1, 2], num_res_blocks: 1, attn_resolutions: []}
gpt: {n_layer: 1, n_head: 2, n_embd: 16, tokenizer_checkpoint: none}
data: {kind: synthetic, frames: 4, height: 8, width: 8, num_samples: 64, eval_samples: 8,
       seed: 3, prefetch: 1}
train: {steps: 1, batch: 2, schedule: constant, log_every: 1, eval_every: 0,
        checkpoint_every: 1}
replicated: [tokenizer]
)",
                                         "<test vqgpt>");
  sets.push_back("output_dir=" + out);
  for (const std::string& s : sets) config::apply_override(root, s);
  return config::parse_app_config(root, config::App::vqgpt);
}

}  // namespace

TEST(SavedRun, ACheckpointOfTheOtherAppIsNamedAsSuch) {
  const std::string dir = apptest::fresh_dir("zt_saved", "apps");
  fs::create_directories(dir);
  const config::AppConfig gpt_cfg = vqgpt_config(dir + "/gpt");
  apptest::train_vqgpt_with_fresh_tokenizer(gpt_cfg, dir + "/tok.safetensors", 1);
  const std::string gpt_ckpt = dir + "/gpt/checkpoints";
  // The tokenizer's shape, so that only the app tells the checkpoints apart.
  const config::AppConfig tok_cfg = vqtok_config(
      dir + "/tok", {"model.ch_mult=[1, 2]", "model.attn_resolutions=[]", "data.height=8",
                     "data.width=8", "train.steps=1", "train.checkpoint_every=1"});
  train_vqtok(tok_cfg, false);
  const std::string tok_ckpt = dir + "/tok/checkpoints";

  const std::string to_vqtok = "' is a vqgpt checkpoint; vqtok needs one of its own";
  const std::string to_vqgpt = "' is a vqtok checkpoint; vqgpt needs one of its own";
  const std::string gpt_step = gpt_ckpt + "/step_000001", tok_step = tok_ckpt + "/step_000001";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    EXPECT_TRUE(test::throws_with(
        [&] { vqtok::export_model(tok_cfg, gpt_ckpt, dir + "/x.safetensors", comm, true); },
        "'" + gpt_step + to_vqtok));
    EXPECT_TRUE(test::throws_with([&] { vqtok::load_frozen_model(tok_cfg, gpt_ckpt, comm); },
                                  "'" + gpt_step + to_vqtok));
    vqgpt::SampleOptions so;
    so.checkpoint = tok_ckpt;
    so.quiet = true;
    EXPECT_TRUE(
        test::throws_with([&] { vqgpt::sample(gpt_cfg, so, comm); }, "'" + tok_step + to_vqgpt));
    EXPECT_TRUE(test::throws_with(
        [&] { vqgpt::export_model(gpt_cfg, tok_ckpt, dir + "/y.safetensors", comm, true); },
        "'" + tok_step + to_vqgpt));
  });
  // Resumes: train.resume names the other app's checkpoint.
  std::string err = error_of([&] {
    config::AppConfig c = vqtok_config(dir + "/tok2", {"train.resume=" + gpt_ckpt});
    train_vqtok(c, false);
  });
  EXPECT_TRUE(has(err, "'" + gpt_step + to_vqtok + " (vqtok train writes them into")) << err;
  err = error_of([&] {
    const config::AppConfig c = vqgpt_config(dir + "/gpt2", {"train.resume=" + tok_ckpt});
    comm::run_threads(1, [&](comm::Communicator& comm) {
      vqgpt::TrainOptions o;
      o.quiet = true;
      vqgpt::train(c, o, comm);
    });
  });
  EXPECT_TRUE(has(err, "'" + tok_step + to_vqgpt)) << err;
  EXPECT_TRUE(has(err, "vqgpt train reads one as gpt.tokenizer_checkpoint or --tokenizer")) << err;
  fs::remove_all(dir);
}
