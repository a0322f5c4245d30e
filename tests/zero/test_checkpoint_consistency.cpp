// Checkpoint consistency: not a lesson, the regression tests of what a checkpoint must agree
// with. A checkpoint records its optimizer's type, and a load of its state into another
// optimizer is refused; a step-shaped tag names the step the checkpoint records; an
// engine whose last optimizer step failed part-way is not saved; a resume that freezes other
// parameters takes the rest of the optimizer state and names them; a meta.json whose
// learning rate, loss-scaler hysteresis or last overflow is out of range is refused before
// the engine changes; every rank loads the checkpoint rank 0 names.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>

#include "common/test_util.h"
#include "zero/checkpoint_util.h"

using namespace zt;
using lesson::edit_meta;
using lesson::expect_agreed;
using lesson::expect_same;
using lesson::full_state;
using lesson::make_engine;
using lesson::Named;
using lesson::TempDir;
using lesson::train_step;
namespace fs = std::filesystem;

namespace {

// Saves step 1 of a 2-rank AdamW run under root; returns its folder.
std::string save_one_step(const TempDir& tmp) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    train_step(*e, 0);
    zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(e->global_step()));
  });
  return tmp / "step_000001";
}

nlohmann::json read_meta(const std::string& dir) {
  return nlohmann::json::parse(std::ifstream(fs::path(dir) / "meta.json"));
}

}  // namespace

// Adam's moments loaded under AdamW would switch the weight decay from L2 to decoupled;
// a state without moments (SGD's) would give Adam's first step about three times its size.
// The type is recorded, and another one refused, naming both; the model alone loads into
// any optimizer; a checkpoint saved before the type was recorded loads as it did.
TEST(CheckpointConsistency, AnotherOptimizersStateIsRefused) {
  TempDir tmp;
  const std::string dir = save_one_step(tmp);
  const nlohmann::json saved = read_meta(dir).at("optimizer");
  EXPECT_EQ(saved.at("type"), "AdamW");
  EXPECT_EQ(saved.at("beta1"), 0.9);
  EXPECT_EQ(saved.at("weight_decay"), 0.01);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    for (const auto& [type, kind] : {std::pair{"adam", "Adam"}, std::pair{"sgd", "SGD"}}) {
      auto e = make_engine(comm, lesson::make_mixed, 6, {}, type);
      const Named before = full_state(*e);
      expect_agreed(
          comm, [&] { zero::load_checkpoint(*e, dir); },
          std::string("holds the state of optimizer AdamW, but this engine's optimizer is ") +
              kind + ": resume with AdamW");
      expect_same(full_state(*e), before, 0, 0);
      EXPECT_EQ(e->optimizer().step_count(), 0) << "a refused load changes nothing";
      zero::load_checkpoint(*e, dir, /*optimizer_state=*/false);
    }
  });
  edit_meta(dir, [](nlohmann::json& m) { m.erase("optimizer"); });
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 6, {}, "adam");
    zero::load_checkpoint(*e, dir);
    EXPECT_EQ(e->optimizer().step_count(), 1);
  });
}

// A folder named for another step than its meta.json records is passed over by a resume
// and by keep_last: such a save is refused, naming both steps.
TEST(CheckpointConsistency, AStepShapedTagNamesTheRecordedStep) {
  TempDir tmp;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    train_step(*e, 0);  // global_step() 1
    const std::string msg =
        test::error_of([&] { zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(3)); });
    EXPECT_NE(msg.find("the tag names step 3 but the checkpoint records step 1"), std::string::npos)
        << msg;
    zero::CheckpointExtra extra;
    extra.step = 3;  // the app's count, skipped steps included
    zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(3), extra);
    zero::save_checkpoint(*e, tmp.path, "best");  // not step-shaped: any step
  });
  EXPECT_EQ(zero::find_resume_point(tmp.path).step, 3);
}

// Rank 0 names the checkpoint: were `dir_or_root` resolved on each rank, ranks that see
// another `latest` (or another working folder for a relative path) would load different
// steps into one model. Here rank 1 passes a path that holds nothing: it still loads
// step 2, the one rank 0's root names, as rank 0 does.
TEST(CheckpointConsistency, EveryRankLoadsTheCheckpointRankZeroNames) {
  TempDir tmp;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    train_step(*e, 0);
    zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(1));
    train_step(*e, 1);
    zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(2));
    const Named at_step2 = full_state(*e);
    auto fresh = make_engine(comm, lesson::make_mixed, 6);
    const zero::CheckpointExtra x =
        zero::load_checkpoint(*fresh, comm.rank() == 0 ? tmp.path : tmp / "nothing_here");
    EXPECT_EQ(x.step, 2);
    EXPECT_EQ(fs::path(x.dir).filename(), "step_000002");
    expect_same(full_state(*fresh), at_step2, 0, 0);
  });
}

// A step that failed after it had updated some parameters (here: the second group's step
// constants could not be allocated) leaves parameters and optimizer state at odds. The
// save refuses it; a load makes the engine whole again.
TEST(CheckpointConsistency, NoSaveAfterAStepThatFailedPartWay) {
  TempDir tmp;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    train_step(*e, 0);
    zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(1));
    // Two groups of parameters, each with its step constants in a tensor of its own.
    optim::Optimizer& opt = e->optimizer();
    opt.set_settings({opt.params().front().first}, {0.5, 0.01});
    opt.set_capturable(true);
    // A memory limit 8 bytes looser at each try: the step fails ever later, until the
    // second group's constants are refused after the first group was updated.
    MemoryLedger& ledger = *current_ledger();
    for (int64_t room = 0; room < (1 << 16) && opt.consistent(); room += 8) {
      auto [x, y] = lesson::batch(6, 100);
      e->backward(mse_loss((*e)(x), y));
      ledger.set_limit(Device::cpu(), memory_stats().total_current + room);
      try {
        e->step();
      } catch (const OutOfMemoryError&) {
      }
      ledger.set_limit(Device::cpu(), 0);
    }
    ASSERT_FALSE(opt.consistent());
    const std::set<std::string> before = lesson::entries(tmp.path);
    expect_agreed(
        comm, [&] { zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(e->global_step())); },
        "failed: the last optimizer step failed part-way, so the parameters and the optimizer "
        "state disagree and are not saved; load a checkpoint to go on");
    EXPECT_EQ(lesson::entries(tmp.path), before) << "nothing was written";
    zero::load_checkpoint(*e, tmp / "step_000001");
    EXPECT_TRUE(opt.consistent());
    zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(1));
  });
}

// meta.json's learning rate, loss-scaler hysteresis and last overflow are checked before
// anything is written: a negative rate once failed in set_lr, after the weights were loaded,
// a hysteresis of 0 counted down past 1, so the scale never halved again, and a last
// overflow of INT64_MIN was taken, to overflow the scaler's count of steps since it.
TEST(CheckpointConsistency, AnOutOfRangeLrOrHysteresisChangesNothing) {
  TempDir tmp;
  const std::string dir = save_one_step(tmp);
  const std::string meta_path = "'" + dir + "/meta.json' is malformed: ";
  const nlohmann::json good = read_meta(dir);
  auto refused = [&](const std::function<void(nlohmann::json&)>& harm, const std::string& needle) {
    edit_meta(dir, [&](nlohmann::json& m) {
      m = good;
      harm(m);
    });
    comm::run_threads(2, [&](comm::Communicator& comm) {
      auto e = make_engine(comm, lesson::make_mixed, 6);
      const Named before = full_state(*e);
      expect_agreed(
          comm, [&] { zero::load_checkpoint(*e, dir); }, meta_path + needle);
      expect_same(full_state(*e), before, 0, 0);
      EXPECT_EQ(e->lr(), 1e-2);
    });
  };
  refused([](nlohmann::json& m) { m["lr"] = -0.001; },
          "lr is -0.001, not a learning rate (finite, >= 0)");
  refused(
      [](nlohmann::json& m) {
        m["loss_scaler"] = {{"dynamic", true},
                            {"scale", 1024.0},
                            {"hysteresis", 0},
                            {"iteration", 5},
                            {"last_overflow", -1}};
      },
      "loss_scaler holds scale 1024 and hysteresis 0 (a finite scale > 0 and a hysteresis >= 1 "
      "are needed)");
  // The scaler counts the iterations since the last overflow: one before -1 or past the
  // iteration would overflow that count, or make it up.
  for (const nlohmann::json& last : {nlohmann::json(std::numeric_limits<int64_t>::min()),
                                     nlohmann::json(6), nlohmann::json(1e300)})
    refused(
        [&](nlohmann::json& m) {
          m["loss_scaler"] = {{"dynamic", true},
                              {"scale", 1024.0},
                              {"hysteresis", 2},
                              {"iteration", 5},
                              {"last_overflow", last}};
        },
        "loss_scaler.last_overflow is " + last.dump() +
            ", not an integer from -1 to loss_scaler.iteration (5)");
  refused(
      [](nlohmann::json& m) {
        m["loss_scaler"] = {
            {"dynamic", true}, {"scale", 1024.0}, {"hysteresis", 2}, {"iteration", 5}};
      },
      "loss_scaler.last_overflow is missing");
}

// The optimizer state belongs to the trainable parameters: a parameter frozen when the
// checkpoint was saved has none, and a parameter frozen now has no place for its state.
// A resume whose model freezes other parameters than the saved run's is refused before
// anything changes, naming them and which side froze them; the weights alone still load.
// A freezing schedule's resume: the parameters frozen on one side only are named in a note;
// the rest of the optimizer state is restored, theirs starts afresh (frozen at save) or is
// not taken (frozen now), and the next step matches a run that froze them as this one does.
TEST(CheckpointConsistency, ParametersFrozenOnOneSideOnlyAreNamedAndTheRestResumes) {
  auto with_frozen_head = [](bool frozen) {
    return [frozen](comm::Communicator&) -> std::shared_ptr<nn::Module> {
      auto m = std::make_shared<lesson::Mixed>();
      if (frozen) m->head->requires_grad_(false);
      return m;
    };
  };
  for (bool frozen_at_save : {true, false}) {
    SCOPED_TRACE(frozen_at_save ? "frozen at save" : "frozen now");
    TempDir tmp;
    testing::internal::CaptureStderr();
    comm::run_threads(2, [&](comm::Communicator& comm) {
      auto e = make_engine(comm, with_frozen_head(frozen_at_save), 5);
      train_step(*e, 0);
      zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(e->global_step()));
      auto now = make_engine(comm, with_frozen_head(!frozen_at_save), 6);
      zero::load_checkpoint(*now, tmp.path);
      expect_same(full_state(*now), full_state(*e), 0, 0);
      // The body's moments are restored: its next step is the saving run's next step.
      train_step(*now, 1);
      train_step(*e, 1);
      const Named a = full_state(*now), b = full_state(*e);
      for (const auto& [name, t] : a)
        if (name.rfind("head.", 0) != 0) {
          const auto it =
              std::find_if(b.begin(), b.end(), [&](auto& kv) { return kv.first == name; });
          ASSERT_NE(it, b.end()) << name;
          EXPECT_CLOSE(t, it->second, 0, 0) << name;
        }
    });
    const std::string err = testing::internal::GetCapturedStderr();
    const std::string side = frozen_at_save
                                 ? "frozen when it was saved, now trainable: their optimizer "
                                   "state starts afresh"
                                 : "trainable when it was saved, now frozen: their saved "
                                   "optimizer state is not taken";
    EXPECT_NE(err.find("note: head.weight, head.bias, " + side), std::string::npos) << err;
  }
}
