// vqtok training as a careful user meets its failures (thread ranks, the tiny model of
// test_vqtok_app.cpp). What these tests pin down:
//  1. --resume with a missing, empty or garbage `latest`, one naming a missing step, or a
//     newest checkpoint without meta.json resumes from the newest complete checkpoint and
//     loses no step folder or metrics line; with no complete checkpoint it stops with an
//     error and changes nothing;
//  2. a new run into a folder holding checkpoints is refused (naming --resume, output_dir
//     and --overwrite); --overwrite replaces the earlier results once the new run has taken
//     a step, and a run that fails before that gets them back; --overwrite with --resume,
//     or one that would set aside what the run reads, and a train.resume that would save
//     among another run's checkpoints are refused, changing nothing; so is a run into a
//     folder another live run is writing; a folder holding only an earlier run's results
//     (metrics, curves: it saved no checkpoint) counts as an earlier run;
//  3. resuming from the checkpoint of every step of a short run (dead-code restarts in
//     between) ends bit for bit where the uninterrupted run ends;
//  4. non-finite weights are an error in eval, a diverging run stops naming the step;
//  5. ranks given different configs stop at start-up naming the differing key (numbers
//     compare as numbers);
//  6. a resume at another world size or batch size reads on after the samples already read;
//  7. a torn last metrics line is dropped on --resume, earlier lines kept; a metrics line
//     the disk has no room for is an error, not a silent loss.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "apps/app_test_util.h"
#include "apps/common/run_checks.h"
#include "apps/common/train_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"
#include "configs/config.h"
#include "data/factory.h"
#include "nn/safetensors.h"
#include "zero/checkpoint.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

// The shared tiny config with this file's schedule: 4 steps, a checkpoint every 2 (all kept), no
// eval.
config::AppConfig tiny_config(const std::string& out_dir, std::vector<std::string> sets = {}) {
  sets.insert(sets.begin(), {"train.steps=4", "train.eval_every=0", "train.checkpoint_every=2",
                             "train.keep_checkpoints=0"});
  return apptest::tiny_vqtok_config(out_dir, std::move(sets));
}

std::string fresh_dir(const std::string& name) {
  return apptest::fresh_dir("zt_rel", name);
}

std::vector<std::string> lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream f(path);
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

// The error text of f(), "" when it does not throw.
using test::error_of;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The record of `step` in metrics lines, as text ("" when absent).
std::string line_of_step(const std::vector<std::string>& ls, int64_t step) {
  for (const std::string& l : ls)
    if (nlohmann::json::parse(l).value("step", int64_t{-1}) == step) return l;
  return "";
}

}  // namespace

// Two runs never write into one output_dir at once: the second is refused, naming the
// first. The lock is the kernel's (flock): it goes with its process, so what a killed run
// left in the file stops nobody.
TEST(Reliability, ASecondRunIntoAFolderInUseIsRefused) {
  const std::string dir = fresh_dir("lock");
  {
    zero::RunLock other(dir);  // another run, alive (this process)
    const std::string err = error_of([&] { apptest::train_vqtok(tiny_config(dir), false); });
    EXPECT_TRUE(has(err, "vqtok train: '" + dir + "' is in use by another run (pid " +
                             std::to_string(::getpid()) + " on "))
        << err;
    EXPECT_FALSE(fs::exists(dir + "/checkpoints"));
  }
  write_file(dir + "/.lock", "p1-h0-0\npid 1 on a machine that was restarted\n");
  EXPECT_EQ(apptest::train_vqtok(tiny_config(dir), false).steps, 4);
  EXPECT_EQ(lines(dir + "/.lock").size(), 0u) << "released: the file names nobody";
  fs::remove_all(dir);
}

TEST(Reliability, ResumeWithABrokenLatestUsesTheNewestCompleteCheckpoint) {
  const std::string base = fresh_dir("latest");
  apptest::train_vqtok(tiny_config(base), false);  // checkpoints at steps 2 and 4, metrics for 1..4
  const std::string ck = base + "/checkpoints";
  const auto metrics = lines(base + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 4u);

  struct Case {
    const char* name;
    std::function<void(const std::string&)> damage;
    int64_t start;
  };
  const std::vector<Case> cases = {
      {"missing latest", [](const std::string& c) { fs::remove(c + "/latest"); }, 4},
      {"empty latest", [](const std::string& c) { write_file(c + "/latest", ""); }, 4},
      {"garbage latest", [](const std::string& c) { write_file(c + "/latest", "\x01../??\n"); }, 4},
      {"latest names a missing step",
       [](const std::string& c) { write_file(c + "/latest", "step_000099\n"); }, 4},
      {"newest meta.json gone",
       [](const std::string& c) { fs::remove(c + "/step_000004/meta.json"); }, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = fresh_dir("latest_case");
    fs::copy(base, dir, fs::copy_options::recursive);
    c.damage(dir + "/checkpoints");
    // One more step than was saved: the resumed run trains from its start to step 5.
    const vqtok::TrainResult r = apptest::train_vqtok(tiny_config(dir, {"train.steps=5"}), true, 1);
    EXPECT_EQ(r.start_step, c.start);
    EXPECT_EQ(r.steps, 5);
    for (const char* step : {"step_000002", "step_000004", "step_000005"})
      EXPECT_TRUE(fs::exists(dir + "/checkpoints/" + step + "/meta.json")) << step;
    const auto after = lines(dir + "/metrics.jsonl");
    ASSERT_EQ(after.size(), 5u);
    for (int64_t s = 1; s <= c.start; ++s)
      EXPECT_EQ(line_of_step(after, s), line_of_step(metrics, s)) << "step " << s;
    fs::remove_all(dir);
  }
  (void)ck;
  fs::remove_all(base);
}

TEST(Reliability, ResumeWithNoCompleteCheckpointStopsAndChangesNothing) {
  const std::string dir = fresh_dir("nocomplete");
  apptest::train_vqtok(tiny_config(dir), false);
  fs::remove(dir + "/checkpoints/step_000002/meta.json");
  fs::remove(dir + "/checkpoints/step_000004/rank_00001.safetensors");  // digests fail
  const auto before = lines(dir + "/metrics.jsonl");
  const std::string err =
      error_of([&] { apptest::train_vqtok(tiny_config(dir, {"train.steps=6"}), /*resume=*/true); });
  EXPECT_TRUE(has(err, "no complete checkpoint")) << err;
  EXPECT_TRUE(has(err, "rank_00001.safetensors")) << err;
  EXPECT_TRUE(has(err, "--overwrite")) << err;
  EXPECT_EQ(lines(dir + "/metrics.jsonl"), before);
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_000002"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_000004/meta.json"));
  fs::remove_all(dir);
}

TEST(Reliability, ANewRunIntoAnEarlierRunsFolderIsRefusedUnlessOverwrite) {
  const std::string dir = fresh_dir("refuse");
  apptest::train_vqtok(tiny_config(dir), false);
  const auto before = lines(dir + "/metrics.jsonl");
  const std::string err =
      error_of([&] { apptest::train_vqtok(tiny_config(dir, {"train.steps=3"}), false); });
  for (const char* part : {"already holds checkpoints", "--resume", "output_dir", "--overwrite"})
    EXPECT_TRUE(has(err, part)) << part << " not in: " << err;
  EXPECT_EQ(lines(dir + "/metrics.jsonl"), before);
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_000002/meta.json"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_000004/meta.json"));

  // --overwrite clears the earlier run deliberately: only the new run's results remain.
  const vqtok::TrainResult r =
      apptest::train_vqtok(tiny_config(dir, {"train.steps=3"}), false, 2, true);
  EXPECT_EQ(r.start_step, 0);
  EXPECT_EQ(lines(dir + "/metrics.jsonl").size(), 3u);
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/step_000004"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/step_000003/meta.json"));
  EXPECT_EQ(zero::find_checkpoint(dir + "/checkpoints"), dir + "/checkpoints/step_000003");
  EXPECT_FALSE(fs::exists(dir + "/.overwritten"));  // deleted once the run took its step
  fs::remove_all(dir);
}

// A run that saved no checkpoint (train.checkpoint_every: 0) leaves results all the same:
// its metrics and curves are as much an earlier run's as checkpoints are.
TEST(Reliability, ResultsWithoutCheckpointsAreAnEarlierRunToo) {
  const std::string dir = fresh_dir("results_only"), other = fresh_dir("results_other");
  auto config = [&](std::vector<std::string> sets) {
    sets.insert(sets.begin(), "train.checkpoint_every=0");
    return tiny_config(dir, std::move(sets));
  };
  apptest::train_vqtok(config({}), false);
  ASSERT_FALSE(zero::holds_checkpoints(dir + "/checkpoints"));
  const auto before = lines(dir + "/metrics.jsonl");
  ASSERT_EQ(before.size(), 4u);
  std::string err = error_of([&] { apptest::train_vqtok(config({"train.steps=3"}), false); });
  for (const char* part : {"holds the results of an earlier run (curves.svg, metrics.jsonl)",
                           "output_dir", "--overwrite", "--resume"})
    EXPECT_TRUE(has(err, part)) << part << " not in: " << err;
  EXPECT_EQ(lines(dir + "/metrics.jsonl"), before);
  // Resuming another run's checkpoint there would write over them as well.
  apptest::train_vqtok(tiny_config(other), false);
  err = error_of(
      [&] { apptest::train_vqtok(config({"train.resume=" + other + "/checkpoints"}), false); });
  EXPECT_TRUE(has(err, "holds an earlier run's results (curves.svg, metrics.jsonl)")) << err;
  EXPECT_EQ(lines(dir + "/metrics.jsonl"), before);

  // --overwrite replaces them; --resume starts that run over (it saved nothing to go on from).
  EXPECT_EQ(apptest::train_vqtok(config({"train.steps=3"}), false, 2, /*overwrite=*/true).steps, 3);
  EXPECT_EQ(lines(dir + "/metrics.jsonl").size(), 3u);
  EXPECT_EQ(apptest::train_vqtok(config({"train.steps=2"}), /*resume=*/true).start_step, 0);
  EXPECT_EQ(lines(dir + "/metrics.jsonl").size(), 2u);
  fs::remove_all(dir);
  fs::remove_all(other);
}

TEST(Reliability, AnOverwriteThatFailsBeforeItsFirstStepGivesTheEarlierRunBack) {
  const std::string dir = fresh_dir("overwrite_fails");
  apptest::train_vqtok(tiny_config(dir), false);
  const auto before = lines(dir + "/metrics.jsonl");
  // A new run that diverges at its first step: it stops before it has replaced anything.
  const std::string err = error_of([&] {
    apptest::train_vqtok(tiny_config(dir, {"loss.l2=1.0e39"}), false, 2, /*overwrite=*/true);
  });
  EXPECT_TRUE(has(err, "the loss is not finite at step 1")) << err;
  EXPECT_TRUE(fs::exists(dir + "/.overwritten/checkpoints/step_000004/meta.json"));
  EXPECT_EQ(lines(dir + "/.overwritten/metrics.jsonl"), before);
  // The next start puts the earlier run back, and --resume continues it.
  const vqtok::TrainResult r = apptest::train_vqtok(tiny_config(dir, {"train.steps=5"}), true);
  EXPECT_EQ(r.start_step, 4);
  EXPECT_FALSE(fs::exists(dir + "/.overwritten"));
  const auto after = lines(dir + "/metrics.jsonl");
  ASSERT_EQ(after.size(), 5u);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], before[i]);
  fs::remove_all(dir);
}

TEST(Reliability, StartsThatWouldLoseAnEarlierRunAreRefused) {
  const std::string dir = fresh_dir("start_refusals"), other = fresh_dir("start_other");
  apptest::train_vqtok(tiny_config(dir), false);    // checkpoints at steps 2 and 4
  apptest::train_vqtok(tiny_config(other), false);  // another run's
  const std::string root = dir + "/checkpoints";
  auto start = [&](std::vector<std::string> sets, app::StartRequest req) {
    return error_of([&] {
      comm::run_threads(1, [&](comm::Communicator& comm) {
        app::start_run(tiny_config(dir, std::move(sets)), root, req, comm);
      });
    });
  };
  const auto before = lines(dir + "/metrics.jsonl");
  std::string err = start({}, {"t", /*resume=*/true, /*overwrite=*/true});
  EXPECT_TRUE(has(err, "pass one of them")) << err;
  err = start({"train.resume=" + root + "/step_000002"}, {"t", false, /*overwrite=*/true});
  EXPECT_TRUE(has(err, "would delete")) << err;
  EXPECT_TRUE(has(err, "(train.resume)")) << err;
  err = start({}, {"t", false, true, false, {{"gpt.tokenizer_checkpoint", root}}});
  EXPECT_TRUE(has(err, "(gpt.tokenizer_checkpoint), which this run reads")) << err;
  // Resuming from another run's checkpoint, or this run's older one, would save among
  // this run's checkpoints.
  for (const std::string& from : {other + "/checkpoints", root + "/step_000002"}) {
    err = start({"train.resume=" + from}, {"t"});
    EXPECT_TRUE(has(err, "is not the newest of them")) << from << ": " << err;
  }
  EXPECT_EQ(lines(dir + "/metrics.jsonl"), before);
  EXPECT_TRUE(fs::exists(root + "/step_000002/meta.json"));
  EXPECT_TRUE(fs::exists(root + "/step_000004/meta.json"));
  EXPECT_FALSE(fs::exists(dir + "/.overwritten"));
  // An output_dir that is a file is named as such.
  const std::string file = dir + "/not_a_folder";
  write_file(file, "x");
  err = error_of([&] {
    comm::run_threads(
        1, [&](comm::Communicator& comm) { app::start_run(tiny_config(file), root, {"t"}, comm); });
  });
  EXPECT_TRUE(has(err, "output_dir '" + file + "' is a file, not a folder")) << err;
  // Its newest continues it.
  std::string from;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    from = app::start_run(tiny_config(dir, {"train.resume=" + root + "/step_000004"}), root, {"t"},
                          comm)
               .resume_from;
  });
  EXPECT_EQ(from, root + "/step_000004");
  // A run started from another's checkpoint (train.resume) by a launcher that passes
  // --resume every time: the first launch starts from that checkpoint, a later one (the
  // run has saved its own) continues from the run's newest. One command line for both.
  const std::string warm = fresh_dir("start_warm");
  auto start_warm = [&] {
    std::string got;
    comm::run_threads(1, [&](comm::Communicator& comm) {
      got = app::start_run(tiny_config(warm, {"train.resume=" + root + "/step_000002"}),
                           warm + "/checkpoints", {"t", /*resume=*/true}, comm)
                .resume_from;
    });
    return got;
  };
  EXPECT_EQ(start_warm(), root + "/step_000002");
  apptest::train_vqtok(tiny_config(warm, {"train.resume=" + root + "/step_000002"}), false);
  EXPECT_EQ(start_warm(), warm + "/checkpoints/step_000004");
  fs::remove_all(dir);
  fs::remove_all(other);
  fs::remove_all(warm);
}

TEST(Reliability, ResumingAtEveryStepIsBitIdentical) {
  // Dead-code restarts every 2 steps, a checkpoint every step: steps 1 and 3 are saved
  // with code counts pending, which the resumed run must continue; dropout draws from each
  // rank's random stream, which it must continue too.
  const std::vector<std::string> sets = {"train.steps=4", "train.checkpoint_every=1",
                                         "train.codebook_restart_every=2", "model.dropout=0.2"};
  const std::string full = fresh_dir("bits_full");
  apptest::train_vqtok(tiny_config(full, sets), false);
  const auto want = lines(full + "/metrics.jsonl");
  const nlohmann::json final_files =
      nlohmann::json::parse(std::ifstream(full + "/checkpoints/step_000004/meta.json"))["files"];
  for (int64_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE("resumed at step " + std::to_string(k));
    const std::string dir = fresh_dir("bits_resume");
    const std::string tag = zero::checkpoint_tag(k);
    fs::create_directories(dir + "/checkpoints");
    fs::copy(full + "/checkpoints/" + tag, dir + "/checkpoints/" + tag);
    write_file(dir + "/checkpoints/latest", tag + "\n");
    const vqtok::TrainResult r = apptest::train_vqtok(tiny_config(dir, sets), true);
    EXPECT_EQ(r.start_step, k);
    // Every parameter, master, optimizer moment, buffer and code count, by digest.
    const nlohmann::json files =
        nlohmann::json::parse(std::ifstream(dir + "/checkpoints/step_000004/meta.json"))["files"];
    EXPECT_EQ(files, final_files);
    // The metrics of the steps it trained: the same losses to the last bit.
    const auto got = lines(dir + "/metrics.jsonl");
    for (int64_t s = k + 1; s <= 4; ++s) {
      const auto a = nlohmann::json::parse(line_of_step(got, s));
      const auto b = nlohmann::json::parse(line_of_step(want, s));
      for (const char* key : {"loss", "mse", "vq", "codes_used", "grad_norm"})
        EXPECT_EQ(a[key], b[key]) << key << " at step " << s;
    }
    fs::remove_all(dir);
  }
  fs::remove_all(full);
}

// An epoch's samples form one global order that the ranks deal out round-robin, so a
// resume at another world size or batch goes on after as many samples as the saved run
// had read (rounded down to a whole batch of the new run, with a note).
TEST(Reliability, ResumingAtAnotherWorldSizeGoesOnAfterTheSamplesAlreadyRead) {
  const std::string dir = fresh_dir("reshape");
  apptest::train_vqtok(tiny_config(dir, {"train.steps=2", "train.batch=4"}),
                       false);  // 2 ranks: 16 read
  auto loader_at = [&](int64_t step) {
    return nlohmann::json::parse(
        std::ifstream(dir + "/checkpoints/" + zero::checkpoint_tag(step) + "/meta.json"))["loader"];
  };
  EXPECT_EQ(loader_at(2),
            (nlohmann::json{{"epoch", 0}, {"position", 2}, {"batch", 4}, {"dataset_size", 64}}));
  // 1 rank x batch 8: sample 16 is step 2; one step later the stream is at 3.
  const auto sets = [](int steps, int batch) {
    return std::vector<std::string>{"train.steps=" + std::to_string(steps),
                                    "train.batch=" + std::to_string(batch),
                                    "train.checkpoint_every=1"};
  };
  EXPECT_EQ(apptest::train_vqtok(tiny_config(dir, sets(3, 8)), true, 1).start_step, 2);
  EXPECT_EQ(loader_at(3),
            (nlohmann::json{{"epoch", 0}, {"position", 3}, {"batch", 8}, {"dataset_size", 64}}));
  // From there (24 samples) at 3 ranks x batch 4, 12 a step: step 2, then 3.
  EXPECT_EQ(apptest::train_vqtok(tiny_config(dir, sets(4, 4)), true, 3).start_step, 3);
  EXPECT_EQ(loader_at(4),
            (nlohmann::json{{"epoch", 0}, {"position", 3}, {"batch", 4}, {"dataset_size", 64}}));

  // The note the resumed run prints says where it goes on and what it reads again.
  config::AppConfig cfg = tiny_config(dir, {"train.batch=4"});
  auto loader = data::make_loader(data::make_dataset(cfg.data), cfg.data, 4, 0, 2);
  zero::CheckpointExtra saved;
  saved.loader_position = 5;
  saved.loader_batch = 2;
  saved.saved_world_size = 3;  // 30 samples; 2 ranks x batch 4 go on at 24
  const std::string note = app::resume_data(*loader, saved);
  EXPECT_EQ(loader->state(), (data::LoaderState{0, 3}));
  EXPECT_TRUE(has(note, "at sample 30 of epoch 0 (3 ranks x batch 2)")) << note;
  EXPECT_TRUE(has(note, "goes on at sample 24 of epoch 0, reading 6 samples again")) << note;
  // Past the end of this run's epoch (of 18 samples 2 ranks x batch 4 read 16 an epoch,
  // 1 rank x batch 1 all 18): it goes on with the next epoch and says what it leaves.
  config::AppConfig small = tiny_config(dir, {"train.batch=4", "data.num_samples=18"});
  auto short_loader = data::make_loader(data::make_dataset(small.data), small.data, 4, 0, 2);
  zero::CheckpointExtra past;
  past.loader_position = 16;
  past.loader_batch = 1;
  past.saved_world_size = 1;
  const std::string next = app::resume_data(*short_loader, past);
  EXPECT_EQ(short_loader->state(), (data::LoaderState{1, 0}));
  EXPECT_TRUE(has(next, "with epoch 1, leaving the last 2 samples of epoch 0 unread")) << next;
  // A data set of another size than the checkpoint's: its shuffle is another, and the
  // note says what that means for the epoch under way.
  zero::CheckpointExtra grown = past;
  grown.loader_position = 4;
  grown.loader_batch = 4;
  grown.saved_world_size = 2;
  grown.loader_dataset_size = 16;
  const std::string other = app::resume_data(*short_loader, grown);
  EXPECT_TRUE(has(other,
                  "the data set holds 18 items, not the 16 it held when the checkpoint "
                  "was saved: the rest of epoch 0 follows another shuffle"))
      << other;
  // What the saved layout left unread is counted over the data set it read: 20 ranks,
  // more than this data set holds, at sample 20 of an epoch of 40 leave 20.
  zero::CheckpointExtra wide = past;
  wide.loader_position = 1;
  wide.saved_world_size = 20;
  wide.loader_dataset_size = 40;
  const std::string unread = app::resume_data(*short_loader, wide);
  EXPECT_TRUE(has(unread, "with epoch 1, leaving the last 20 samples of epoch 0 unread")) << unread;
  fs::remove_all(dir);
}

TEST(Reliability, NonFiniteWeightsAreAnErrorInEval) {
  const std::string dir = fresh_dir("nan_eval");
  const config::AppConfig cfg = tiny_config(dir, {"train.steps=1", "train.checkpoint_every=1"});
  apptest::train_vqtok(cfg, false, 1);
  const std::string weights = dir + "/model.safetensors";
  comm::run_threads(
      1, [&](comm::Communicator& comm) { vqtok::export_model(cfg, "", weights, comm, true); });
  nn::NamedTensors state = nn::load_safetensors(weights);
  std::string poisoned;
  for (auto& [name, t] : state)
    if (name.find("decoder") != std::string::npos && name.find("weight") != std::string::npos) {
      t.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
      poisoned = name;
      break;
    }
  ASSERT_FALSE(poisoned.empty());
  nn::save_safetensors(weights, state);
  const std::string err = error_of([&] {
    comm::run_threads(2, [&](comm::Communicator& comm) {
      vqtok::EvalOptions o;
      o.weights = weights;
      o.batches = 1;
      vqtok::evaluate(cfg, o, comm);
    });
  });
  EXPECT_TRUE(has(err, "non-finite")) << err;
  EXPECT_TRUE(has(err, poisoned)) << err;
  fs::remove_all(dir);
}

TEST(Reliability, ADivergingRunStopsNamingTheStepAndSavesNoNonFiniteCheckpoint) {
  const std::string dir = fresh_dir("nan_train");
  const config::AppConfig cfg =
      tiny_config(dir, {"train.steps=3", "train.checkpoint_every=1", "loss.l2=1.0e39"});
  const std::string err = error_of([&] { apptest::train_vqtok(cfg, false); });
  EXPECT_TRUE(has(err, "at step ")) << err;
  EXPECT_TRUE(has(err, "the loss is not finite at step 1")) << err;
  EXPECT_TRUE(has(err, "weighted sum")) << err;
  EXPECT_TRUE(has(err, "Training stops here")) << err;
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/step_000001"));
  fs::remove_all(dir);
}

// Under fp16 a step whose loss is not finite is one the engine skips: the run goes on, and
// its log window, which measured nothing, records nulls and the skipped steps (not a loss
// of 0 and a PSNR of 99 dB).
TEST(Reliability, AnFp16WindowOfSkippedStepsLogsNoValues) {
  const std::string dir = fresh_dir("fp16_skipped");
  const config::AppConfig cfg =
      tiny_config(dir, {"train.steps=2", "train.log_every=1", "train.checkpoint_every=0",
                        "fp16={enabled: true}", "loss.l2=1.0e39"});
  apptest::train_vqtok(cfg, false);
  int records = 0;
  for (const std::string& l : lines(dir + "/metrics.jsonl")) {
    const auto r = nlohmann::json::parse(l);
    if (r.value("kind", "") != "train") continue;
    ++records;
    EXPECT_TRUE(r["loss"].is_null()) << l;
    EXPECT_TRUE(r["psnr"].is_null()) << l;
    EXPECT_EQ(r["skipped_steps"], r["step"]) << l;
  }
  EXPECT_EQ(records, 2);
  fs::remove_all(dir);
}

// A step that reads more clips than the data holds (a large accumulation on a small data
// set) is noted: every step then spans more than an epoch.
TEST(Reliability, AStepBeyondAnEpochIsNoted) {
  EXPECT_EQ(app::epoch_note(2, 2, 4, 16), "");
  const std::string note = app::epoch_note(4, 2, 16, 64);
  EXPECT_TRUE(has(note,
                  "one step reads 128 clips (train.batch 4 x 2 ranks x 16 "
                  "train.gradient_accumulation_steps), more than the training data's 64"))
      << note;
}

TEST(Reliability, RanksWithDifferentConfigsStopNamingTheKey) {
  const std::string dir = fresh_dir("ranks");
  for (const auto& [set, key] : std::vector<std::pair<std::string, std::string>>{
           {"train.lr=1.0e-2", "train.lr"},
           {"model.codebook_size=32", "model.codebook_size"},
           {"train.gradient_accumulation_steps=2", "train.gradient_accumulation_steps"}}) {
    SCOPED_TRACE(set);
    const config::AppConfig a = tiny_config(dir), b = tiny_config(dir, {set});
    std::string errs[2];
    comm::run_threads(2, [&](comm::Communicator& comm) {
      vqtok::TrainOptions o;
      o.quiet = true;
      errs[comm.rank()] = error_of([&] { vqtok::train(comm.rank() == 0 ? a : b, o, comm); });
    });
    for (const std::string& e : errs) {
      EXPECT_TRUE(has(e, "different configurations")) << e;
      EXPECT_TRUE(has(e, "'" + key + "'")) << e;
    }
  }
  EXPECT_FALSE(fs::exists(dir + "/checkpoints"));
  // Data that differs (e.g. a relative data.path under two working directories) is named.
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const config::AppConfig c =
        tiny_config(dir, {"data.num_samples=" + std::to_string(32 << comm.rank())});
    const std::string e =
        error_of([&] { app::check_same_data(*data::make_dataset(c.data), comm, "t"); });
    EXPECT_TRUE(has(e, "different data: 'data' is ")) << e;
    EXPECT_TRUE(has(e, ", 32 items on rank 0 but ")) << e;
    EXPECT_TRUE(has(e, ", 64 items on rank 1")) << e;
  });
  // Numbers are compared as numbers: 0.003 and the config's 3.0e-3 are one learning rate.
  const config::AppConfig same = tiny_config(dir),
                          written_otherwise = tiny_config(dir, {"train.lr=0.003"});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const config::AppConfig& mine = comm.rank() == 0 ? same : written_otherwise;
    EXPECT_EQ(error_of([&] { app::check_same_config(mine.root, comm, "test"); }), "");
  });
  fs::remove_all(dir);
}

TEST(Reliability, ModelsThatDifferAreNamed) {
  const config::AppConfig a = tiny_config("x"),
                          b = tiny_config("x", {"model.embed_dim=8", "model.z_channels=8"});
  std::string errs[2];
  comm::run_threads(2, [&](comm::Communicator& comm) {
    vq::VqModel m(comm.rank() == 0 ? a.model : b.model);
    errs[comm.rank()] = error_of([&] { app::check_same_model(m, comm, "test"); });
  });
  EXPECT_TRUE(has(errs[0], "different models")) << errs[0];
  EXPECT_TRUE(has(errs[1], "[4] on rank 0 but [8] on rank 1")) << errs[1];
}

TEST(Reliability, ATornLastMetricsLineIsDroppedOnResume) {
  const std::string dir = fresh_dir("torn");
  apptest::train_vqtok(tiny_config(dir), false);
  const auto before = lines(dir + "/metrics.jsonl");
  {
    std::ofstream f(dir + "/metrics.jsonl", std::ios::app);
    f << R"({"kind": "train", "step": 5, "lo)";  // a write cut short by a kill
  }
  const vqtok::TrainResult r = apptest::train_vqtok(tiny_config(dir, {"train.steps=5"}), true);
  EXPECT_EQ(r.start_step, 4);
  const auto after = lines(dir + "/metrics.jsonl");
  ASSERT_EQ(after.size(), 5u);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], before[i]);
  EXPECT_EQ(nlohmann::json::parse(after[4])["step"], 5);
  // Records past a resumed step are dropped with a note that counts them.
  const std::string note = app::filter_metrics(
      dir + "/metrics.jsonl", [](const nlohmann::json& r) { return r.value("step", 0) <= 3; });
  EXPECT_TRUE(has(note, "dropped 2 records past the resumed step")) << note;
  EXPECT_EQ(lines(dir + "/metrics.jsonl").size(), 3u);
  // A bad line that is not the last is an error naming it.
  write_file(dir + "/bad.jsonl", "{\"step\": 1}\nnot json\n{\"step\": 2}\n");
  std::string torn;
  const std::string err = error_of([&] { app::read_metrics(dir + "/bad.jsonl", &torn); });
  EXPECT_TRUE(has(err, "bad.jsonl:2")) << err;
  // So is JSON that is not a record zt wrote (a number; a step that is a string).
  for (const std::string& line : {std::string("42"), std::string(R"({"step": "5"})")}) {
    write_file(dir + "/odd.jsonl", "{\"step\": 1}\n" + line + "\n{\"step\": 2}\n");
    const std::string odd = error_of([&] { app::read_metrics(dir + "/odd.jsonl", &torn); });
    EXPECT_TRUE(has(odd, "odd.jsonl:2: not a metrics record")) << odd;
  }
  fs::remove_all(dir);
}

TEST(Reliability, AMetricsLineTheDiskCannotHoldIsAnError) {
  // Linux's /dev/full refuses every write with ENOSPC: a disk that is always full.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here (a container without it)";
  app::MetricsWriter metrics("/dev/full", /*append=*/true);
  EXPECT_TRUE(test::throws_with(
      [&] {
        metrics.write({{"step", 1}, {"loss", 0.5}});
      },
      "writing metrics to '/dev/full' failed (disk full?)"));
}
