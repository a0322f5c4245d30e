// What a resume goes on with (thread ranks, the tiny vqtok model of test_vqtok_app.cpp and the
// tiny vqgpt of test_vqgpt.cpp). What these tests pin down:
//  1. at the same world size, a run resumed from the checkpoint of any step saves the same
//     checkpoints bit for bit (every tensor by digest; optimizer step, learning rate, applied
//     and skipped steps, data position, loss scaler) and logs the same metrics records, evals
//     included, as the uninterrupted run: with dead-code restarts and dropout in between, with
//     gradient accumulation and evals, for an fp16 run whose every step overflows and for an
//     fp16 vqgpt run whose loss scale is kept by hysteresis, halved and grown again;
//  2. a resume at another world size or batch size reads on after the samples already read.
// How --resume meets damaged folders and earlier runs: test_reliability.cpp.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "apps/common/resume_data.h"
#include "apps/common/rng_state.h"
#include "apps/reliability_test_util.h"
#include "apps/vqgpt_test_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "data/factory.h"
#include "nn/safetensors.h"
#include "zero/checkpoint.h"

using namespace zt;
using namespace zt::reltest;
namespace fs = std::filesystem;

namespace {

// What two runs of one computation may log otherwise: timings and memory high-water marks.
constexpr const char* kMachineFigures[] = {"step_time",      "eta_s",           "tokens_per_s",
                                           "tokenizer_time", "tokenizer_share", "memory"};

// The metrics records a run logged after step `after`, in order, less kMachineFigures.
std::vector<nlohmann::json> records_after(const std::string& run, int64_t after) {
  std::vector<nlohmann::json> out;
  for (const std::string& l : lines(run + "/metrics.jsonl")) {
    nlohmann::json r = nlohmann::json::parse(l);
    if (r.value("step", int64_t{0}) <= after) continue;
    for (const char* key : kMachineFigures) r.erase(key);
    out.push_back(std::move(r));
  }
  return out;
}

// What the checkpoint of `step` holds: every file by digest (parameters, fp32 masters,
// optimizer moments, buffers, code counts, random streams) and the counters a run goes on from.
nlohmann::json saved_state(const std::string& run, int64_t step) {
  const auto meta = nlohmann::json::parse(
      std::ifstream(run + "/checkpoints/" + zero::checkpoint_tag(step) + "/meta.json"));
  nlohmann::json out;
  for (const char* key : {"files", "optimizer_step", "lr", "engine_steps", "loader", "loss_scaler"})
    out[key] = meta.value(key, nlohmann::json());
  return out;
}

// Trains a run into the folder given (from its newest checkpoint when resuming, a
// checkpoint every step) and returns the step it started from.
using Train = std::function<int64_t(const std::string& dir, bool resume)>;

struct Uninterrupted {
  nlohmann::json state;                 // its last checkpoint's (saved_state)
  std::vector<nlohmann::json> records;  // all its metrics records (records_after)
};

// Trains `steps` steps uninterrupted, then again from its checkpoint of each step of `at`,
// alone in a fresh folder. Each resumed run must save the same checkpoints, bit for bit,
// and log the same records (evals included) to the last bit. Returns the uninterrupted run.
Uninterrupted expect_resumes_bit_identical(const Train& train, int64_t steps,
                                           const std::vector<int64_t>& at) {
  const std::string full = fresh_dir("bits_full");
  EXPECT_EQ(train(full, false), 0);
  Uninterrupted want{saved_state(full, steps), records_after(full, 0)};
  EXPECT_FALSE(want.state["files"].empty());
  for (int64_t k : at) {
    SCOPED_TRACE("resumed at step " + std::to_string(k));
    const std::string dir = fresh_dir("bits_resume");
    const std::string tag = zero::checkpoint_tag(k);
    fs::create_directories(dir + "/checkpoints");
    fs::copy(full + "/checkpoints/" + tag, dir + "/checkpoints/" + tag);
    write_file(dir + "/checkpoints/latest", tag + "\n");
    EXPECT_EQ(train(dir, true), k);
    for (int64_t s = k + 1; s <= steps; ++s)
      EXPECT_EQ(saved_state(dir, s), saved_state(full, s)) << "checkpoint of step " << s;
    const auto got = records_after(dir, 0), expected = records_after(full, k);
    EXPECT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < std::min(got.size(), expected.size()); ++i)
      EXPECT_EQ(got[i], expected[i]) << "record " << i;
    fs::remove_all(dir);
  }
  fs::remove_all(full);
  return want;
}

// vqtok on 2 thread ranks with this file's tiny config, `sets` and a checkpoint every step.
Train vqtok_run(std::vector<std::string> sets) {
  sets.push_back("train.checkpoint_every=1");
  return [sets](const std::string& dir, bool resume) {
    return apptest::train_vqtok(tiny_config(dir, sets), resume).start_step;
  };
}

int64_t count_kind(const std::vector<nlohmann::json>& records, const std::string& kind) {
  return std::count_if(records.begin(), records.end(),
                       [&](const nlohmann::json& r) { return r.value("kind", "") == kind; });
}

}  // namespace

// Dead-code restarts every 2 steps: steps 1 and 3 are saved with code counts pending, which
// the resumed run must continue; dropout draws from each rank's random stream, which it must
// continue too.
TEST(ResumeIdentity, ResumingAtEveryStepIsBitIdentical) {
  const Uninterrupted full = expect_resumes_bit_identical(
      vqtok_run({"train.codebook_restart_every=2", "model.dropout=0.2"}), 4, {1, 2, 3});
  EXPECT_EQ(full.state["optimizer_step"], 4);
  EXPECT_EQ(count_kind(full.records, "train"), 4);
}

// 8 clips on 2 ranks of batch 2 make an epoch of 2 steps: step 3's checkpoint stands in the
// second epoch, whose order the resumed run must read on in.
TEST(ResumeIdentity, ResumingInASecondEpochIsBitIdentical) {
  expect_resumes_bit_identical(vqtok_run({"data.num_samples=8"}), 4, {3});
}

// A finished run extended by --resume with more train.steps goes on as the longer run did
// (a constant learning rate, so that the schedule's length changes nothing): the dead-code
// restart due at its last step, which it skipped (moved codes would have gone untrained),
// runs first.
TEST(ResumeIdentity, ExtendingAFinishedRunRunsTheRestartItsLastStepSkipped) {
  const std::vector<std::string> sets = {"train.codebook_restart_every=2",
                                         "train.schedule=constant", "train.warmup=0",
                                         "train.checkpoint_every=1"};
  auto with_steps = [&](const std::string& dir, const std::string& steps) {
    std::vector<std::string> s = sets;
    s.push_back("train.steps=" + steps);
    return tiny_config(dir, s);
  };
  const std::string full = fresh_dir("extend_full"), extended = fresh_dir("extend_short");
  apptest::train_vqtok(with_steps(full, "4"));
  apptest::train_vqtok(with_steps(extended, "2"));
  EXPECT_EQ(apptest::train_vqtok(with_steps(extended, "4"), /*resume=*/true).start_step, 2);
  for (int64_t s : {3, 4})
    EXPECT_EQ(saved_state(extended, s), saved_state(full, s)) << "checkpoint of step " << s;
  fs::remove_all(full);
  fs::remove_all(extended);
}

// Two micro-batches a step and an eval every 2 steps: a resume goes on at the right
// micro-batch of the data and evaluates at the same steps on the same weights.
TEST(ResumeIdentity, ResumingWithAccumulationAndEvalIsBitIdentical) {
  const Uninterrupted full = expect_resumes_bit_identical(
      vqtok_run({"train.gradient_accumulation_steps=2", "train.eval_every=2",
                 "train.codebook_restart_every=2", "model.dropout=0.2"}),
      4, {1, 2, 3});
  EXPECT_EQ(full.state["loader"]["position"], 8) << "4 steps of 2 micro-batches";
  EXPECT_EQ(count_kind(full.records, "eval"), 2);
}

// An fp16 run whose every step overflows: the loss scale (kept once by hysteresis, then
// halved) and the skip counts go on from the checkpoint, and no optimizer step is ever taken.
TEST(ResumeIdentity, ResumingAnFp16RunWhoseStepsAllOverflowIsBitIdentical) {
  const Uninterrupted full = expect_resumes_bit_identical(
      vqtok_run({"fp16={enabled: true, initial_scale_power: 40, hysteresis: 2}"}), 4, {1, 2, 3});
  EXPECT_EQ(full.state["engine_steps"], (nlohmann::json{{"applied", 0}, {"skipped", 4}}));
  EXPECT_EQ(full.state["optimizer_step"], 0);
  EXPECT_EQ(full.state["loss_scaler"]["scale"], std::ldexp(1.0, 37));
}

// vqgpt in fp16 with dropout, 2 micro-batches a step and an eval every 2 steps, its loss scale
// set so that steps overflow: step 1's scale is kept by hysteresis, step 2 halves it, 2 good
// steps double it, and step 6's is kept again. The warmup goes on only with applied steps.
TEST(ResumeIdentity, ResumingAnFp16VqGptRunWithSkippedStepsIsBitIdentical) {
  const std::string tokenizer = fresh_dir("bits_tokenizer") + ".safetensors";
  auto config = [](const std::string& dir) {
    return vqgpt_test::tiny_config(
        dir,
        "fp16: {enabled: true, initial_scale_power: 19, hysteresis: 2, loss_scale_window: 2}\n",
        {"train.steps=6", "train.log_every=1", "train.eval_every=2", "train.checkpoint_every=1",
         "train.keep_checkpoints=0", "train.gradient_accumulation_steps=2", "gpt.dropout=0.1",
         "train.schedule=cosine", "train.warmup=4"});
  };
  nn::save_safetensors(tokenizer, vqgpt_test::pretrained_tokenizer(config("unused")));
  const Train train = [&](const std::string& dir, bool resume) {
    int64_t start = -1;
    comm::run_threads(2, [&](comm::Communicator& comm) {
      vqgpt::TrainOptions o;
      o.quiet = true;
      o.tokenizer = tokenizer;
      o.resume = resume;
      const vqgpt::TrainResult r = vqgpt::train(config(dir), o, comm);
      if (comm.rank() == 0) start = r.start_step;
    });
    return start;
  };
  // Resumed across the loss scaler's cycle (here: with the hysteresis spent, after the
  // halving, within the growth window, after it).
  const Uninterrupted full = expect_resumes_bit_identical(train, 6, {1, 2, 3, 5});
  fs::remove(tokenizer);
  // Which steps overflow depends on the fp16 gradients' last bits, and so on the CPU's BLAS
  // (its order of sums): the pattern is read from the run, which must have skipped some
  // steps and applied others. (Here: steps 1, 2 and 6 skipped, the scale kept, halved,
  // grown back and kept again.)
  const int64_t applied = full.state["engine_steps"]["applied"].get<int64_t>();
  const int64_t skipped_steps = full.state["engine_steps"]["skipped"].get<int64_t>();
  EXPECT_EQ(applied + skipped_steps, 6);
  EXPECT_GT(applied, 0);
  EXPECT_GT(skipped_steps, 0);
  std::vector<int64_t> skipped;  // skipped so far, at each step's record
  std::vector<double> lr;
  for (const nlohmann::json& r : full.records)
    if (r["kind"] == "train") {
      skipped.push_back(r["skipped_steps"].get<int64_t>());
      lr.push_back(r["lr"].get<double>() / 3.0e-3);
    }
  ASSERT_EQ(skipped.size(), 6u);
  EXPECT_EQ(skipped.back(), skipped_steps);
  // The warmup moves on with the updates applied before a step, not with its number.
  for (size_t i = 0; i < lr.size(); ++i) {
    const int64_t applied_before = static_cast<int64_t>(i) - (i ? skipped[i - 1] : 0);
    if (applied_before < 4) {
      EXPECT_NEAR(lr[i], (applied_before + 1) / 4.0, 1e-12) << "step " << i + 1;
    }
  }
  EXPECT_EQ(count_kind(full.records, "eval"), 3);
}

// An epoch's samples form one global order that the ranks deal out round-robin, so a
// resume at another world size or batch goes on after as many samples as the saved run
// had read (rounded down to a whole batch of the new run, with a note).
TEST(ResumeIdentity, ResumingAtAnotherWorldSizeGoesOnAfterTheSamplesAlreadyRead) {
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
  saved.saved_world_size = 1;  // 10 samples, one rank's
  const std::string one = app::resume_data(*loader, saved);
  EXPECT_TRUE(has(one, "at sample 10 of epoch 0 (1 rank x batch 2)")) << one;
  // The batch of this run at another world size is another layout too; this run's own
  // layout is none.
  saved.loader_position = 3;
  saved.loader_batch = 4;  // 12 samples; 2 ranks x batch 4 go on at 8
  const std::string world = app::resume_data(*loader, saved);
  EXPECT_TRUE(has(world, "at sample 12 of epoch 0 (1 rank x batch 4)")) << world;
  EXPECT_TRUE(has(world, "goes on at sample 8 of epoch 0, reading 4 samples again")) << world;
  saved.saved_world_size = 2;
  EXPECT_EQ(app::resume_data(*loader, saved), "");
  EXPECT_EQ(loader->state(), (data::LoaderState{0, 3}));
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

// Each rank's dropout generator is saved; at the world size that saved them each rank gets
// its own back. At another one they cannot be split: each rank starts a new stream from the
// saved ones and the resumed step (a stream from train.seed alone would draw again the masks
// of the run's first steps), and the run says so.
TEST(ResumeIdentity, DropoutStreamsAtAnotherWorldSizeAreNewAndNoted) {
  Tensor two_ranks;
  std::vector<double> restored(2), seed_stream(2);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    manual_seed(100 + static_cast<uint64_t>(comm.rank()));
    rand({8});  // a step's masks
    const Tensor s = app::gather_rng_state(comm);
    if (comm.rank() == 0) two_ranks = s;
    const double next = rand({1}).item();
    manual_seed(7);
    EXPECT_EQ(app::restore_rng_state(s, comm, 10), "");
    EXPECT_EQ(rand({1}).item(), next) << "rank " << comm.rank() << " continues its own stream";
  });
  comm::run_threads(1, [&](comm::Communicator& comm) {
    for (int64_t step : {10, 11}) {
      const std::string note = app::restore_rng_state(two_ranks, comm, step);
      EXPECT_TRUE(has(note, "the dropout generators of 2 ranks do not split over 1")) << note;
      restored[static_cast<size_t>(step - 10)] = rand({1}).item();
    }
    config::TrainConfig train;
    for (size_t i = 0; i < 2; ++i) {
      app::seed_dropout(train, comm);
      seed_stream[i] = rand({1}).item();
    }
    EXPECT_EQ(app::restore_rng_state(Tensor(), comm, 10), "") << "nothing saved: unchanged";
  });
  EXPECT_NE(restored[0], restored[1]) << "the step enters the new stream";
  EXPECT_NE(restored[0], seed_stream[0]) << "not the stream train.seed starts";
  // Over 3 ranks each rank draws a new stream of its own, as each reads its own data.
  std::vector<double> three(3);
  comm::run_threads(3, [&](comm::Communicator& comm) {
    app::restore_rng_state(two_ranks, comm, 10);
    three[static_cast<size_t>(comm.rank())] = rand({1}).item();
  });
  EXPECT_NE(three[0], three[1]);
  EXPECT_NE(three[1], three[2]);
  EXPECT_NE(three[0], three[2]);
}

// The run says so only where the model draws from those streams: with dropout 0 a resume at
// another world size notes nothing about them.
TEST(ResumeIdentity, TheDropoutStreamsNoteIsForModelsWithDropout) {
  for (const char* dropout : {"0.0", "0.1"}) {
    const std::string dir = fresh_dir(std::string("dropout_note_") + dropout);
    const auto cfg = [&](const char* steps) {
      return tiny_config(
          dir, {"train.steps=" + std::string(steps), "train.batch=2", "train.checkpoint_every=1",
                "model.dropout=" + std::string(dropout)});
    };
    apptest::train_vqtok(cfg("1"), false, 2);
    ::testing::internal::CaptureStderr();
    comm::run_threads(1, [&](comm::Communicator& comm) {
      vqtok::TrainOptions o;
      o.resume = true;
      o.quiet = false;
      vqtok::train(cfg("2"), o, comm);
    });
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(has(err, "the dropout generators of 2 ranks do not split over 1"),
              std::string(dropout) != "0.0")
        << "model.dropout " << dropout << ": " << err;
    fs::remove_all(dir);
  }
}
