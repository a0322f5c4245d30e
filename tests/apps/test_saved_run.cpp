// What a checkpoint records of its run (meta.json: the app, the config) and the checks
// that read it (apps/common/saved_run.h). What these tests pin down:
//  1. a resume whose config describes another model (model.*, vqgpt's gpt.*) stops before
//     it trains, naming each key with both values, also where the shapes are the same
//     (model.l2_norm_codes); a key written out at its default is no change; every model
//     key is compared (config::for_each_model_key lists them once);
//  2. a resume with other train/loss/data settings goes on, with a note naming them, but
//     not the keys that only say where and how the run is carried out (log_every, workers);
//  3. a checkpoint of the other app is named as such, by every loader of each app;
//  4. a checkpoint of another precision (or optimizer) is answered with advice the command
//     at hand can follow: set train.dtype, pass an export where the command reads one,
//     train anew where it resumes.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "apps/app_test_util.h"
#include "apps/common/saved_run.h"
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

TEST(SavedRun, AResumeWithAnotherModelStopsNamingTheKeys) {
  const std::string dir = apptest::fresh_dir("zt_saved", "model");
  apptest::train_vqtok(vqtok_config(dir), false);
  // Same shapes, another model: cosine codes.
  std::string err = error_of([&] {
    apptest::train_vqtok(
        vqtok_config(dir, {"model.l2_norm_codes=true", "model.dropout=0.5", "train.steps=4"}),
        true);
  });
  for (const char* part :
       {"vqtok train: this config describes another model than the checkpoint '",
        "model.l2_norm_codes (false in the checkpoint, true in this config)",
        "model.dropout (0 in the checkpoint, 0.5 in this config)",
        "set these keys back to the checkpoint's values", "another output_dir, or --overwrite"})
    EXPECT_TRUE(has(err, part)) << part << " not in: " << err;
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/step_000004"));
  // Written out at its default value, a key is the same model.
  const vqtok::TrainResult r =
      apptest::train_vqtok(vqtok_config(dir, {"model.l2_norm_codes=false", "train.steps=4"}), true);
  EXPECT_EQ(r.start_step, 2);
  EXPECT_EQ(r.steps, 4);
  fs::remove_all(dir);
}

// eval, export, encode and sample read a checkpoint with the config they are given: one
// that describes another model is named by its keys before any tensor is read; keys the
// weights do not depend on (model.dropout) do not count.
// Every key of ModelConfig changed at once: each is named, and with weights_only all but
// the two that do not shape the trained weights (dropout, out_init_scale).
TEST(SavedRun, EveryModelKeyIsCompared) {
  const config::ModelConfig before;
  config::ModelConfig after;
  int keys = 0;
  config::for_each_model_key([&](const char*, auto member, auto, auto, bool) {
    auto& field = after.*member;
    using T = std::remove_cvref_t<decltype(field)>;
    if constexpr (std::is_same_v<T, bool>)
      field = !field;
    else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
      field.push_back(1);
    else
      field += 1;
    ++keys;
  });
  EXPECT_EQ(keys, 13);
  EXPECT_EQ(app::model_changes(before, after, false).size(), 13u);
  const std::vector<app::KeyChange> weights = app::model_changes(before, after, true);
  EXPECT_EQ(weights.size(), 11u);
  for (const app::KeyChange& c : weights)
    EXPECT_TRUE(c.key != "model.dropout" && c.key != "model.out_init_scale") << c.key;
}

TEST(SavedRun, InferenceWithAnotherModelStopsNamingTheKeys) {
  const std::string dir = apptest::fresh_dir("zt_saved", "infer");
  apptest::train_vqtok(vqtok_config(dir), false);
  auto check = [&](std::vector<std::string> sets) {
    const config::AppConfig cfg = vqtok_config(dir, std::move(sets));
    return error_of([&] {
      comm::run_threads(2, [&](comm::Communicator& comm) {
        app::check_checkpoint_app(dir + "/checkpoints", "vqtok", comm, &cfg);
      });
    });
  };
  const std::string err = check({"model.codebook_size=128"});
  EXPECT_TRUE(has(err, "this config describes another model than the checkpoint '")) << err;
  EXPECT_TRUE(has(err, "model.codebook_size (64 in the checkpoint, 128 in this config)")) << err;
  EXPECT_EQ(check({"model.dropout=0.3"}), "");
  EXPECT_EQ(check({}), "");
  // The run's folder in place of its checkpoints: the error points at them.
  EXPECT_EQ(app::run_folder_hint(dir + "/checkpoints"), "");
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const std::string run =
        error_of([&] { vqtok::load_frozen_model(vqtok_config(dir), dir, comm); });
    EXPECT_TRUE(
        has(run, "('" + dir + "/checkpoints' holds this run's checkpoints: pass that folder)"))
        << run;
  });
  // Another precision, named before the model is built and loaded. Each reader's advice is
  // one it can follow: vqtok's --weights readers take an export instead; export itself is
  // told that its file is fp32 all the same, not to read an export.
  const std::string dtype = check({"train.dtype=bf16"});
  EXPECT_TRUE(has(dtype, "trained in f32 and this config reads it in bf16")) << dtype;
  EXPECT_TRUE(has(dtype, "set train.dtype: f32 to read it")) << dtype;
  EXPECT_FALSE(has(dtype, "export")) << dtype;
  const config::AppConfig bf16 = vqtok_config(dir, {"train.dtype=bf16"});
  std::string reader, exporter;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    reader = error_of([&] { vqtok::load_frozen_model(bf16, dir + "/checkpoints", comm); });
    exporter = error_of(
        [&] { vqtok::export_model(bf16, "", dir + "/x.safetensors", comm, /*quiet=*/true); });
  });
  EXPECT_TRUE(has(reader,
                  "set train.dtype: f32 to read it, or pass --weights an exported "
                  ".safetensors file of it (fp32)"))
      << reader;
  EXPECT_TRUE(has(exporter,
                  "set train.dtype: f32 to read it (the export is fp32 whatever "
                  "precision the checkpoint is read in)"))
      << exporter;
  EXPECT_FALSE(has(exporter, "read its export")) << exporter;
  EXPECT_FALSE(fs::exists(dir + "/x.safetensors"));
  fs::remove_all(dir);
}

// vqgpt sample and export read checkpoints only (no exported file) and train reads no
// weights of an earlier run: a checkpoint of another precision is answered with what each
// command can do.
TEST(SavedRun, AVqgptCheckpointOfAnotherPrecisionGetsAdviceItsCommandCanFollow) {
  const std::string dir = apptest::fresh_dir("zt_saved", "gpt_dtype");
  fs::create_directories(dir);
  const config::AppConfig f32 = vqgpt_config(dir + "/run");
  apptest::train_vqgpt_with_fresh_tokenizer(f32, dir + "/tok.safetensors", 1);
  const config::AppConfig bf16 = vqgpt_config(dir + "/run", {"train.dtype=bf16", "train.steps=2"});
  std::string sampled, exported, resumed;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqgpt::SampleOptions so;
    so.quiet = true;
    sampled = error_of([&] { vqgpt::sample(bf16, so, comm); });
    exported = error_of([&] { vqgpt::export_model(bf16, "", dir + "/x.safetensors", comm, true); });
    vqgpt::TrainOptions o;
    o.quiet = true;
    o.resume = true;
    resumed = error_of([&] { vqgpt::train(bf16, o, comm); });
  });
  EXPECT_TRUE(has(sampled, "trained in f32 and this config reads it in bf16")) << sampled;
  EXPECT_TRUE(has(sampled, "set train.dtype: f32 to read it")) << sampled;
  EXPECT_FALSE(has(sampled, "export")) << sampled;
  EXPECT_TRUE(has(exported, "set train.dtype: f32 to read it (the export is fp32")) << exported;
  EXPECT_FALSE(has(exported, "read its export")) << exported;
  EXPECT_TRUE(has(resumed, "vqgpt train: the checkpoint '")) << resumed;
  EXPECT_TRUE(has(resumed,
                  "set train.dtype: f32, or train in bf16 as a new run (another "
                  "output_dir, or --overwrite)"))
      << resumed;
  EXPECT_FALSE(has(resumed, "export")) << resumed;
  fs::remove_all(dir);
}

// vqgpt's model is its tokenizer's model.* and its GPT's gpt.* (vocab_size and block_size
// as resolved); gpt.tokenizer_checkpoint is not read on a resume.
TEST(SavedRun, AVqgptResumeWithAnotherGptStopsNamingTheKeys) {
  const std::string dir = apptest::fresh_dir("zt_saved", "gpt");
  fs::create_directories(dir);
  apptest::train_vqgpt_with_fresh_tokenizer(vqgpt_config(dir + "/run"), dir + "/tok.safetensors",
                                            1);
  auto resume = [&](std::vector<std::string> sets) {
    sets.push_back("train.steps=2");
    const config::AppConfig cfg = vqgpt_config(dir + "/run", std::move(sets));
    return error_of([&] {
      comm::run_threads(1, [&](comm::Communicator& comm) {
        vqgpt::TrainOptions o;
        o.quiet = true;
        o.resume = true;
        vqgpt::train(cfg, o, comm);
      });
    });
  };
  const std::string err = resume({"gpt.dropout=0.25", "gpt.vocab_size=67"});
  for (const char* part : {"vqgpt train: this config describes another model",
                           "gpt.dropout (0 in the checkpoint, 0.25 in this config)"})
    EXPECT_TRUE(has(err, part)) << part << " not in: " << err;
  EXPECT_FALSE(has(err, "vocab_size")) << "67 is what 0 resolves to: " << err;
  // One q/k/v projection's parameters are not three's: named before any tensor is read.
  const std::string fused = resume({"gpt.fused_qkv=true"});
  EXPECT_TRUE(has(fused, "gpt.fused_qkv (false in the checkpoint, true in this config)")) << fused;
  // The first run read its tokenizer from --tokenizer: its checkpoint records that path.
  const std::string tok = dir + "/tok.safetensors";
  auto recorded = [&](const std::string& step) {
    std::ifstream meta(dir + "/run/checkpoints/" + step + "/meta.json");
    return vqgpt::recorded_tokenizer(nlohmann::json::parse(meta).value("config_yaml", ""));
  };
  EXPECT_EQ(recorded("step_000001"), tok);
  EXPECT_EQ(resume({"gpt.vocab_size=67", "gpt.tokenizer_checkpoint=elsewhere"}), "");
  // The resume trained on the checkpoint's tokenizer, and its checkpoint says so.
  EXPECT_EQ(recorded("step_000002"), tok);
  // ... and a note says another one was named (the newest checkpoint is that resume's, to
  // step 2): the run goes on with the tokenizer it trained with.
  auto note = [&](const std::string& tokenizer) {
    const config::AppConfig cfg =
        vqgpt_config(dir + "/run", {"gpt.tokenizer_checkpoint=" + tokenizer, "train.steps=2"});
    ::testing::internal::CaptureStderr();
    comm::run_threads(1, [&](comm::Communicator& comm) {
      app::check_resume_config(cfg, dir + "/run/checkpoints", "vqgpt", "vqgpt train", comm,
                               /*quiet=*/false);
    });
    return ::testing::internal::GetCapturedStderr();
  };
  const std::string other = note("none");
  EXPECT_TRUE(has(other,
                  "vqgpt train: note: the tokenizer named here, 'none', is not the one the "
                  "checkpoint's config records (gpt.tokenizer_checkpoint: '" +
                      tok +
                      "'), and a resume does not read it: the checkpoint holds the tokenizer "
                      "it trained with"))
      << other;
  EXPECT_EQ(note(dir + "/./tok.safetensors"), "") << "the same path, written another way";
  // A resume given the same tokenizer by --tokenizer (the config names another) is told
  // only that --tokenizer is not read.
  const config::AppConfig more = vqgpt_config(dir + "/run", {"train.steps=3"});
  ::testing::internal::CaptureStderr();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqgpt::TrainOptions o;
    o.resume = true;
    o.tokenizer = tok;
    vqgpt::train(more, o, comm);
  });
  const std::string same = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(same, "--tokenizer '" + tok + "' is not read on a resume")) << same;
  EXPECT_FALSE(has(same, "is not the one the checkpoint's config records")) << same;
  fs::remove_all(dir);
}

TEST(SavedRun, AResumeWithOtherSettingsGoesOnWithANote) {
  const std::string dir = apptest::fresh_dir("zt_saved", "settings");
  apptest::train_vqtok(vqtok_config(dir), false);
  const std::string ckpt = dir + "/checkpoints";
  auto note = [&](std::vector<std::string> sets, int ranks = 2, const std::string& from = "") {
    const config::AppConfig cfg = vqtok_config(dir, std::move(sets));
    ::testing::internal::CaptureStderr();
    const std::string err = error_of([&] {
      comm::run_threads(ranks, [&](comm::Communicator& comm) {
        app::check_resume_config(cfg, from.empty() ? ckpt : from, "vqtok", "vqtok train", comm,
                                 /*quiet=*/false);
      });
    });
    const std::string out = ::testing::internal::GetCapturedStderr();  // also after an error
    if (!err.empty()) throw Error(err);
    return out;
  };
  EXPECT_EQ(note({}), "");
  EXPECT_EQ(note({"train.lr=0.003"}), "") << "3.0e-3 written another way";
  // Where and how the run is carried out is no change to it.
  EXPECT_EQ(note({"train.log_every=2", "train.checkpoint_every=1", "data.workers=2",
                  "train.resume=" + ckpt, "train.eval_every=3", "train.eval_batches=2",
                  "train.keep_checkpoints=5", "data.prefetch=3", "train.tensorboard=true",
                  "train.activation_checkpointing=true"}),
            "");
  const std::string text = note(
      {"train.lr=1e-3", "train.steps=6", "loss.l1=0.5", "data.shuffle=false", "train.log_every=2"});
  for (const char* part :
       {"vqtok train: note: resuming with settings that differ from the checkpoint's: ",
        "train.lr (3.0e-3 in the checkpoint, 1e-3 in this config)",
        "train.steps (2 in the checkpoint, 6 in this config)",
        "loss.l1 (0.1 in the checkpoint, 0.5 in this config)",
        "data.shuffle ((not set) in the checkpoint, false in this config)",
        "the run goes on with this config's values"})
    EXPECT_TRUE(has(text, part)) << part << " not in: " << text;
  EXPECT_FALSE(has(text, "log_every")) << text;
  // train.seed seeds the initial weights, which the checkpoint replaces, and the ranks'
  // dropout generators, whose states it restores on as many ranks as saved it: no change
  // there. On another number of ranks the seed starts the generators anew.
  EXPECT_EQ(note({"train.seed=5"}), "");
  EXPECT_TRUE(
      has(note({"train.seed=5"}, 1), "train.seed ((not set) in the checkpoint, 5 in this config)"))
      << note({"train.seed=5"}, 1);
  // A root whose `latest` is out of date: the note says which checkpoint the resume takes.
  const std::string root = dir + "/stale_latest";
  fs::copy(ckpt, root, fs::copy_options::recursive);
  std::ofstream(root + "/latest") << "step_000001\n";
  const std::string stale = note({}, 2, root);
  EXPECT_TRUE(has(stale, "vqtok train: note: '" + root + "/latest' names 'step_000001'")) << stale;
  // Another precision cannot load the checkpoint's parameters: refused before the load.
  const std::string err = error_of([&] { note({"train.dtype=bf16"}); });
  EXPECT_TRUE(has(err, "trained in f32 and this config trains in bf16")) << err;
  EXPECT_TRUE(has(err, "set train.dtype: f32")) << err;
  // So is another optimizer: its state is not the checkpoint's (adam's moments are adamw's,
  // but its weight decay is not).
  EXPECT_TRUE(has(err, "or train in bf16 as a new run (another output_dir, or --overwrite)"))
      << err;
  EXPECT_FALSE(has(err, "export")) << "neither app starts a run from exported weights: " << err;
  const std::string adam = error_of([&] { note({"train.optimizer=adam"}); });
  EXPECT_TRUE(has(adam,
                  "holds AdamW's moments and this config's optimizer keeps Adam's moments "
                  "(train.optimizer)"))
      << adam;
  EXPECT_FALSE(has(adam, "train.momentum")) << "Adam has no momentum key: " << adam;
  EXPECT_TRUE(has(adam,
                  "set them back, or train with this optimizer as a new run (another "
                  "output_dir, or --overwrite)"))
      << adam;
  EXPECT_FALSE(has(adam, "export")) << adam;
  const std::string sgd = error_of([&] { note({"train.optimizer=sgd", "train.momentum=0.9"}); });
  EXPECT_TRUE(has(sgd,
                  "holds AdamW's moments and this config's optimizer keeps SGD's momentum "
                  "buffers (train.optimizer)"))
      << sgd;
  // SGD's momentum is 0 unless set, as torch's: no state at all.
  const std::string plain = error_of([&] { note({"train.optimizer=sgd"}); });
  EXPECT_TRUE(has(plain,
                  "holds AdamW's moments and this config's optimizer keeps no state (SGD, "
                  "momentum 0)"))
      << plain;
  fs::remove_all(dir);
}

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
  apptest::train_vqtok(tok_cfg, false);
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
    apptest::train_vqtok(c, false);
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
  // A meta.json whose keys hold the wrong types is named as malformed, not left to a bare
  // JSON type error.
  const std::string meta = tok_step + "/meta.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(meta));
  j["user"]["app"] = 1;
  std::ofstream(meta) << j.dump();
  EXPECT_TRUE(test::throws_with([&] { app::read_saved_run(tok_step); },
                                "'" + meta + "' is malformed: user.app is 1, not a string"));
  j["user"]["app"] = {{"nested", {1, 2}}};  // quoted by its type, not serialized
  std::ofstream(meta, std::ios::trunc) << j.dump();
  EXPECT_TRUE(test::throws_with(
      [&] { app::read_saved_run(tok_step); },
      "'" + meta + "' is malformed: user.app is an object of 1 key, not a string"));
  // Nested past what a save writes: refused before the parser (or a message) recurses into it.
  j["user"]["app"] = "nest here";
  std::string text = j.dump();
  text.replace(text.find("\"nest here\""), 11, std::string(200000, '[') + std::string(200000, ']'));
  std::ofstream(meta, std::ios::trunc) << text;
  EXPECT_TRUE(test::throws_with([&] { app::read_saved_run(tok_step); },
                                "'" + meta + "' nests 200002 levels deep"));
  fs::remove_all(dir);
}
