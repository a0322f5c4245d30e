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
//     (metrics, curves: it saved no checkpoint) counts as an earlier run, and an empty
//     metrics.jsonl (a run that failed before its first record) does not;
//  3. non-finite weights are an error in eval, a diverging run stops naming the step;
//  4. ranks given different configs stop at start-up naming the differing key (numbers
//     compare as numbers), and so do ranks that read different data or input files;
//  5. a torn last metrics line is dropped on --resume, earlier lines kept; a metrics line
//     the disk has no room for is an error, not a silent loss.
// What a resume goes on with: test_resume_identity.cpp.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "apps/common/run_checks.h"
#include "apps/common/train_util.h"
#include "apps/reliability_test_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/fifo_reader.h"
#include "common/test_util.h"
#include "configs/config.h"
#include "data/factory.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "nn/safetensors.h"
#include "zero/checkpoint.h"

using namespace zt;
namespace fs = std::filesystem;

using namespace zt::reltest;

// The error text of f(), "" when it does not throw.
using test::error_of;

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
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/.overwritten"));
  fs::remove_all(dir);
}

// Checkpoints kept on another disk, output_dir/checkpoints a link to them: --overwrite sets
// aside what the link points to there, on that disk, and deletes it; the link stays, and
// the new run saves through it (moving the link itself left the old checkpoints on that
// disk and put the new ones on output_dir's).
TEST(Reliability, OverwriteKeepsALinkedCheckpointFolderALink) {
  const std::string dir = fresh_dir("linked"), far = fresh_dir("linked_far");
  fs::create_directories(dir);
  fs::create_directories(far);
  fs::create_directory_symlink(far, dir + "/checkpoints");
  apptest::train_vqtok(tiny_config(dir), false);
  ASSERT_TRUE(fs::exists(far + "/step_000004/meta.json"));
  apptest::train_vqtok(tiny_config(dir, {"train.steps=3"}), false, 2, /*overwrite=*/true);
  EXPECT_TRUE(fs::is_symlink(dir + "/checkpoints"));
  EXPECT_TRUE(fs::exists(far + "/step_000003/meta.json"));
  EXPECT_FALSE(fs::exists(far + "/step_000004"));
  EXPECT_FALSE(fs::exists(far + "/.overwritten"));
  EXPECT_EQ(zero::find_checkpoint(dir + "/checkpoints"), dir + "/checkpoints/step_000003");
  fs::remove_all(dir);
  fs::remove_all(far);
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

// A run that failed before its first record (here a loss that overflows at step 1; bad
// data does the same) leaves an empty metrics.jsonl and a tb/ with no event: no results,
// so the next start there needs no --overwrite.
TEST(Reliability, ARunThatRecordedNothingIsNoEarlierRun) {
  const std::string dir = fresh_dir("recorded_nothing");
  const std::string err = error_of([&] {
    apptest::train_vqtok(tiny_config(dir, {"loss.l2=1.0e39", "train.tensorboard=true"}), false);
  });
  EXPECT_TRUE(has(err, "the loss is not finite at step 1")) << err;
  ASSERT_TRUE(fs::exists(dir + "/metrics.jsonl"));
  ASSERT_EQ(fs::file_size(dir + "/metrics.jsonl"), 0u);
  ASSERT_TRUE(fs::exists(dir + "/tb"));
  EXPECT_EQ(apptest::train_vqtok(tiny_config(dir, {"train.tensorboard=true"}), false).steps, 4);
  EXPECT_EQ(lines(dir + "/metrics.jsonl").size(), 4u);
  fs::remove_all(dir);
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
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/.overwritten/step_000004/meta.json"));
  EXPECT_EQ(lines(dir + "/.overwritten/metrics.jsonl"), before);
  // The next start puts the earlier run back, and --resume continues it.
  const vqtok::TrainResult r = apptest::train_vqtok(tiny_config(dir, {"train.steps=5"}), true);
  EXPECT_EQ(r.start_step, 4);
  EXPECT_FALSE(fs::exists(dir + "/.overwritten"));
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/.overwritten"));
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
  // That launch stopped before its first save (killed), leaving its metrics: the next launch
  // of the same command line starts from that checkpoint again. Started from another
  // checkpoint, the results are another run's, and are refused.
  write_file(warm + "/metrics.jsonl", "{\"step\": 1}\n");
  EXPECT_EQ(start_warm(), root + "/step_000002");
  // Where that note is a FIFO, it is refused by name, not opened (which would wait forever).
  const std::string note = warm + "/.started_from";
  ASSERT_TRUE(fs::remove(note));
  ASSERT_EQ(::mkfifo(note.c_str(), 0600), 0);
  err = test::error_of_fifo_reader(note, start_warm);
  EXPECT_TRUE(has(err, "'" + note + "' (the checkpoint a run there started from) is a FIFO"))
      << err;
  fs::remove(note);
  err = error_of([&] {
    comm::run_threads(1, [&](comm::Communicator& comm) {
      app::start_run(tiny_config(warm, {"train.resume=" + root + "/step_000004"}),
                     warm + "/checkpoints", {"t", /*resume=*/true}, comm);
    });
  });
  EXPECT_TRUE(has(err, "holds an earlier run's results (metrics.jsonl)")) << err;
  fs::remove(warm + "/metrics.jsonl");
  apptest::train_vqtok(tiny_config(warm, {"train.resume=" + root + "/step_000002"}), false);
  EXPECT_EQ(start_warm(), warm + "/checkpoints/step_000004");
  fs::remove_all(dir);
  fs::remove_all(other);
  fs::remove_all(warm);
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
// set) is noted: every step then spans more than an epoch. So are the clips an unshuffled
// epoch never reaches, also beside the first note.
TEST(Reliability, AStepBeyondAnEpochIsNoted) {
  EXPECT_EQ(app::epoch_note(2, 2, 4, 16, true), "");
  EXPECT_EQ(app::epoch_note(2, 2, 4, 16, false), "") << "4 whole batches a rank";
  EXPECT_EQ(app::epoch_note(4, 2, 1, 37, true), "") << "shuffled, a new part left out each epoch";
  const std::string left = app::epoch_note(4, 2, 1, 37, false);
  EXPECT_TRUE(has(left,
                  "leaves out the same last 5 of its 37 clips (past whole batches of 4 on "
                  "each of 2 ranks)"))
      << left;
  const std::string note = app::epoch_note(4, 2, 16, 64, true);
  EXPECT_TRUE(has(note,
                  "one step reads 128 clips (train.batch 4 x 2 ranks x 16 "
                  "train.gradient_accumulation_steps), more than the training data's 64"))
      << note;
  // One rank, one clip: counted in the singular.
  const std::string single = app::epoch_note(2, 1, 1, 1, true);
  EXPECT_TRUE(has(single, "one step reads 2 clips (train.batch 2 x 1 rank x 1 ")) << single;
  EXPECT_TRUE(
      has(app::epoch_note(3, 1, 1, 7, false), "(past whole batches of 3 on each of 1 rank)"))
      << app::epoch_note(3, 1, 1, 7, false);
  // Both at once: a step of 3 batches of 4 spans an epoch of 10, whose last 2 are never read.
  const std::string both = app::epoch_note(4, 1, 3, 10, false);
  EXPECT_TRUE(has(both, "one step reads 12 clips")) << both;
  EXPECT_TRUE(has(both, "leaves out the same last 2 of its 10 clips")) << both;
}

// Ranks that list one image folder split the reading of its headers, and every rank
// stops with the error one reader alone gives: every bad file counted, the first ten named
// in file order, whatever the world size.
TEST(Reliability, RanksSplitTheImageHeaderCheckAndEachNamesEveryBadFile) {
  const std::string dir = fresh_dir("headers");
  const std::string images = dir + "/images";
  fs::create_directories(images);
  for (int i = 0; i < 13; ++i) {
    const std::string name = images + "/" + std::to_string(100 + i);
    if (i % 4 == 1 || i == 12)
      std::ofstream(name + ".jpg") << "a saved web page";
    else
      data::save_png(name + ".png", data::Image{8, 8, std::vector<uint8_t>(8 * 8 * 3, 7)});
  }
  const std::string alone = error_of([&] { data::ImageFolder f(images); });
  ASSERT_TRUE(has(alone, "4 of the 13 image files under")) << alone;
  const config::AppConfig cfg = tiny_config(
      dir, {"data.kind=image_folder", "data.path=" + images, "data.frames=4", "train.batch=1"});
  for (int world : {1, 3, 5}) {
    std::vector<std::string> errs(static_cast<size_t>(world));
    comm::run_threads(world, [&](comm::Communicator& comm) {
      errs[static_cast<size_t>(comm.rank())] =
          error_of([&] { app::make_train_data(cfg, comm, "t"); });
    });
    for (const std::string& e : errs) EXPECT_EQ(e, "data.path: " + alone) << world << " ranks";
  }
  fs::remove_all(dir);
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
  // So is encode's: it named no data and failed inside a collective (or, with as many
  // items, wrote each rank's own rows as one file), before any weights are read.
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const config::AppConfig c =
        tiny_config(dir, {"data.num_samples=" + std::to_string(32 << comm.rank())});
    vqtok::EncodeOptions o;
    o.weights = dir + "/no_weights.safetensors";
    o.eval_split = false;
    o.quiet = true;
    const std::string e = error_of([&] { vqtok::encode(c, o, comm); });
    EXPECT_TRUE(has(e, "vqtok encode: the ranks were started with different data: 'data' is "))
        << e;
  });
  // Ranks started as different subcommands (mpirun's 'A : B' form) are named first.
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const std::string e = error_of(
        [&] { app::check_same_command(comm.rank() == 0 ? "vqtok eval" : "vqtok encode", comm); });
    EXPECT_TRUE(has(e,
                    "the ranks were started with different commands: 'command' is vqtok eval "
                    "on rank 0 but vqtok encode on rank 1"))
        << e;
  });
  // A file an option names, read on each rank (decode's --codes): its contents are compared.
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const std::string e = error_of([&] {
      app::check_same_input("--codes", comm.rank() == 0 ? "'c.npy' hash 1" : "'c.npy' hash 2", comm,
                            "vqtok decode");
    });
    EXPECT_TRUE(has(e,
                    "vqtok decode: the ranks were started with different inputs: '--codes' is "
                    "'c.npy' hash 1 on rank 0 but 'c.npy' hash 2 on rank 1"))
        << e;
  });
  // Numbers are compared as numbers: 0.003 and the config's 3.0e-3 are one learning rate.
  const config::AppConfig same = tiny_config(dir),
                          written_otherwise = tiny_config(dir, {"train.lr=0.003"});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const config::AppConfig& mine = comm.rank() == 0 ? same : written_otherwise;
    EXPECT_EQ(error_of([&] { app::check_same_config(mine, comm, "test"); }), "");
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
