// Checkpoint robustness: not a lesson, the regression tests of how saves and loads stay
// safe (lesson 15 teaches what a checkpoint holds). A checkpoint appears only when
// complete; a missing, corrupt or foreign one is refused before anything in the engine
// changes; a failed save leaves the previous checkpoint intact; a resume point is the
// newest complete checkpoint whatever `latest` says, and a meta.json that is not what a
// save writes is damage the resume names; app state travels with the checkpoint, and
// errors name one place. What saves, prunes and resumes leave behind on disk is in
// test_checkpoint_cleanup.cpp.
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "common/test_util.h"
#include "zero/checkpoint_util.h"

using namespace zt;
using lesson::edit_meta;
using lesson::entries;
using lesson::expect_agreed;
using lesson::expect_same;
using lesson::Factory;
using lesson::full_state;
using lesson::make_engine;
using lesson::Named;
using lesson::save_steps;
using lesson::TempDir;
using lesson::train_step;
namespace fs = std::filesystem;

namespace {

// Mixed with one more layer: a different model config.
class MixedPlus : public lesson::Mixed {
 public:
  MixedPlus() { extra = register_module("extra", std::make_shared<nn::Linear>(5, 3)); }
  std::shared_ptr<nn::Linear> extra;
};

// Starts like Mixed, but its first layer has 5 output channels instead of 4.
class Reshaped : public nn::UnaryModule {
 public:
  Reshaped() : nn::UnaryModule("Reshaped") {
    conv3 = register_module("conv3", std::make_shared<nn::Conv3d>(nn::Conv3dOptions(3, 5, 1)));
  }
  std::shared_ptr<nn::Conv3d> conv3;

 protected:
  Tensor forward(const Tensor& x) override { return mean((*conv3)(x), {2, 3, 4}); }
};

// Runs f, expecting a zt::Error whose message contains `needle`.
void expect_error(const std::function<void()>& f, const std::string& needle) {
  EXPECT_TRUE(test::throws_with(f, needle));
}

std::string read_latest(const std::string& root) {
  std::ifstream f(fs::path(root) / "latest");
  std::string tag;
  f >> tag;
  return tag;
}

// Copies the checkpoints under `base` to `d`, edits step 3's meta.json, and checks that a
// resume from the copy passes step 3 over for step 2, and that the note and
// verify_checkpoint both name the meta.json followed by `needle`. Returns step 3's folder.
fs::path expect_passed_over(const std::string& base, const fs::path& d,
                            const std::function<void(nlohmann::json&)>& edit,
                            const std::string& needle) {
  fs::copy(base, d, fs::copy_options::recursive);
  edit_meta(d / "step_000003", edit);
  const std::string named = "'" + (d / "step_000003/meta.json").string() + needle;
  const zero::ResumePoint rp = zero::find_resume_point(d.string());
  EXPECT_EQ(rp.step, 2) << d;
  EXPECT_NE(rp.note.find(named), std::string::npos) << rp.note;
  expect_error([&] { zero::verify_checkpoint(d / "step_000003"); }, named);
  return d / "step_000003";
}

}  // namespace

TEST(CheckpointRobustness, BadCheckpointIsRefusedAndChangesNothing) {
  TempDir tmp;
  const std::string good = tmp / "ckpt/step_000001";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    train_step(*e, 0);
    zero::save_checkpoint(*e, tmp / "ckpt", "step_000001");
  });
  // Damaged copies of the good checkpoint.
  auto damaged = [&](const std::string& name, const std::function<void(const fs::path&)>& harm) {
    fs::path d = fs::path(tmp.path) / name;
    fs::copy(good, d, fs::copy_options::recursive);
    harm(d);
    return d.string();
  };
  std::string missing =
      damaged("missing", [](const fs::path& d) { fs::remove(d / "rank_00001.safetensors"); });
  std::string truncated = damaged("truncated", [](const fs::path& d) {
    fs::resize_file(d / "rank_00000.safetensors", fs::file_size(d / "rank_00000.safetensors") / 2);
  });
  std::string flipped = damaged("flipped", [](const fs::path& d) {
    std::fstream f(d / "rank_00001.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-6, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-6, std::ios::end);
    c = static_cast<char>(c ^ 0x10);
    f.write(&c, 1);
  });
  // meta.json's counters out of range, written so (resealed): the checks past its digest.
  auto meta_edit = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    return damaged(name, [&](const fs::path& d) { edit_meta(d.string(), edit); });
  };
  std::string negative_step =
      meta_edit("negative_step", [](nlohmann::json& m) { m["optimizer_step"] = -1; });
  std::string odd_position =
      meta_edit("odd_position", [](nlohmann::json& m) { m["loader"]["position"] = 2.5; });
  std::string text_lr = meta_edit("text_lr", [](nlohmann::json& m) { m["lr"] = "abc"; });
  std::string text_scale = meta_edit("text_scale", [](nlohmann::json& m) {
    m["loss_scaler"] = {{"scale", "x"}, {"hysteresis", 2}, {"iteration", 0}, {"last_overflow", -1}};
  });
  // Counts no run reaches, which would overflow later (the loader's next epoch, samples
  // counted in batches).
  std::string huge_epoch = meta_edit("huge_epoch", [](nlohmann::json& m) {
    m["loader"]["epoch"] = std::numeric_limits<int64_t>::max();
  });
  std::string huge_batch =
      meta_edit("huge_batch", [](nlohmann::json& m) { m["loader"]["batch"] = int64_t{1} << 40; });
  std::string past_end = meta_edit("past_end", [](nlohmann::json& m) {
    m["loader"]["position"] = 1000;
    m["loader"]["dataset_size"] = 10;
  });

  auto refused = [&](const Factory& make, const std::string& dir, const std::string& needle,
                     const std::string& optimizer = "adamw") {
    comm::run_threads(2, [&](comm::Communicator& comm) {
      auto e = make_engine(comm, make, 7, {}, optimizer);
      Named before = full_state(*e);
      expect_agreed(
          comm, [&] { zero::load_checkpoint(*e, dir); }, needle);
      expect_same(full_state(*e), before, 0.0, 0.0);
      EXPECT_EQ(e->optimizer().step_count(), 0);
      EXPECT_EQ(e->global_step(), 0);
      train_step(*e, 0);  // the engine still trains
    });
  };
  refused(lesson::make_mixed, missing, "missing rank_00001.safetensors");
  refused(lesson::make_mixed, truncated, "rank_00000.safetensors");
  refused(lesson::make_mixed, flipped, "is corrupt");
  refused(lesson::make_mixed, tmp / "nowhere", "no checkpoint at");
  refused(lesson::make_mixed, negative_step,
          "meta.json' is malformed: optimizer_step is -1, not a whole number from 0 to "
          "4611686018427387904");
  refused(lesson::make_mixed, odd_position,
          "meta.json' is malformed: loader.position is 2.5, not a whole number from 0 to ");
  refused(lesson::make_mixed, huge_epoch,
          "meta.json' is malformed: loader.epoch is 9223372036854775807, not a whole number from "
          "0 to 4611686018427387904");
  refused(lesson::make_mixed, huge_batch,
          "meta.json' is malformed: loader.batch is 1099511627776, not a whole number from 0 to "
          "2147483647");
  refused(lesson::make_mixed, text_lr, "meta.json' is malformed: lr is \"abc\", not a number");
  refused(lesson::make_mixed, text_scale,
          "meta.json' is malformed: loss_scaler.scale is \"x\", not a number");
  refused(lesson::make_mixed, past_end,
          "meta.json' is malformed: loader.position 1000 is past the end of its data set "
          "(loader.dataset_size 10)");
  refused([](comm::Communicator&) { return std::make_shared<MixedPlus>(); }, good,
          "'extra.weight' (partitioned f32 [3, 5]) is in this model but not in the checkpoint");
  refused([](comm::Communicator&) { return std::make_shared<Reshaped>(); }, good,
          "'conv3.weight' is partitioned f32 [4, 3, 1, 3, 3] in the checkpoint but partitioned "
          "f32 [5, 3, 1, 1, 1] in this model");
  refused(lesson::make_mixed, good,
          "holds the state of optimizer AdamW, but this engine's optimizer is SGD", "sgd");
}

TEST(CheckpointRobustness, FailedSaveLeavesPreviousCheckpoint) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  Named at_step1;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    train_step(*e, 0);
    zero::save_checkpoint(*e, root, "step_000001");
    Named st = full_state(*e);
    if (comm.rank() == 0) {
      at_step1 = st;
      std::ofstream(fs::path(root) / "step_000002") << "a file in the way\n";
      std::ofstream(tmp / "plain_file") << "not a directory\n";
    }
    comm.barrier();
    train_step(*e, 1);
    expect_agreed(
        comm, [&] { zero::save_checkpoint(*e, root, "step_000002"); }, "is in the way");
    expect_agreed(
        comm, [&] { zero::save_checkpoint(*e, tmp / "plain_file/ckpt", "step_000002"); },
        "save_checkpoint");
  });
  // No temporary directory is left; latest still names the previous checkpoint.
  EXPECT_EQ(entries(root), (std::set<std::string>{"latest", "step_000001", "step_000002"}));
  EXPECT_TRUE(fs::is_regular_file(fs::path(root) / "step_000002"));
  EXPECT_EQ(read_latest(root), "step_000001");
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 99);
    zero::load_checkpoint(*e, root);
    Named st = full_state(*e);
    if (comm.rank() == 0) expect_same(st, at_step1, 0.0, 0.0);
  });
}

TEST(CheckpointRobustness, KeepLastKeepsNewest) {
  TempDir tmp;
  EXPECT_FALSE(zero::has_checkpoint(tmp.path));
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    for (int s = 0; s < 4; ++s) {
      train_step(*e, s);
      zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(e->global_step()), {}, 2);
    }
    // Saving the same tag again replaces it.
    zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(e->global_step()), {}, 2);
  });
  EXPECT_EQ(entries(tmp.path), (std::set<std::string>{"latest", "step_000003", "step_000004"}));
  EXPECT_EQ(read_latest(tmp.path), "step_000004");
  EXPECT_TRUE(zero::has_checkpoint(tmp.path));
  EXPECT_EQ(zero::find_checkpoint(tmp.path), tmp / "step_000004");
}

// find_checkpoint (what eval, export and sample load) passes over a `latest` that is
// missing, garbage, names a deleted folder or an older step than a complete folder, as a
// resume does: the newest complete checkpoint, with a note saying why.
TEST(CheckpointRobustness, FindCheckpointPassesOverABrokenLatest) {
  TempDir tmp;
  const std::string base = tmp / "base";
  save_steps(base, 3);
  std::string note = "unset";
  EXPECT_EQ(zero::find_checkpoint(base, &note), base + "/step_000003");
  EXPECT_EQ(note, "unset") << "latest names it: no note";
  // A save killed between its rename and the update of `latest` left `latest` naming the
  // checkpoint before it.
  std::ofstream(fs::path(base) / "latest", std::ios::trunc) << "step_000002\n";
  EXPECT_EQ(zero::find_checkpoint(base, &note), base + "/step_000003");
  EXPECT_NE(note.find("'" + base + "/latest' names 'step_000002' (step 2), but '" + base +
                      "/step_000003' is newer and complete; taking it"),
            std::string::npos)
      << note;
  fs::remove(fs::path(base) / "latest");
  EXPECT_EQ(zero::find_checkpoint(base, &note), base + "/step_000003");
  EXPECT_NE(note.find("'" + base + "/latest' is missing; taking the newest complete checkpoint"),
            std::string::npos)
      << note;
  std::ofstream(fs::path(base) / "latest") << "step_000009\n";
  EXPECT_EQ(zero::find_checkpoint(base, &note), base + "/step_000003");
  EXPECT_NE(note.find("names 'step_000009'"), std::string::npos) << note;
  std::ofstream(fs::path(base) / "latest") << "\x01garbage";
  EXPECT_EQ(zero::find_checkpoint(base), base + "/step_000003");
  // `latest` names a folder whose meta.json records another step (edited by hand, its
  // digest sealed again): passed over as a resume passes it, not loaded as the step its
  // name says.
  std::ofstream(fs::path(base) / "latest", std::ios::trunc) << "step_000003\n";
  edit_meta(base + "/step_000003", [](nlohmann::json& m) { m["step"] = 6; });
  EXPECT_EQ(zero::find_checkpoint(base, &note), base + "/step_000002");
  EXPECT_NE(note.find("step_000003/meta.json' records step 6, but its folder is named for step 3"),
            std::string::npos)
      << note;
  const std::string empty = tmp / "empty";
  fs::create_directories(empty);
  EXPECT_NE(test::error_of([&] { zero::find_checkpoint(empty); }).find("no checkpoint at"),
            std::string::npos);
}

TEST(CheckpointRobustness, ResumePointIsTheNewestCompleteCheckpoint) {
  TempDir tmp;
  const std::string base = tmp / "base";
  save_steps(base, 3);
  EXPECT_NO_THROW(zero::verify_checkpoint(base + "/step_000003"));
  auto variant = [&](const std::string& name, const std::function<void(const fs::path&)>& harm) {
    const fs::path d = fs::path(tmp.path) / name;
    fs::copy(base, d, fs::copy_options::recursive);
    harm(d);
    return zero::find_resume_point(d.string());
  };
  zero::ResumePoint rp = variant("intact", [](const fs::path&) {});
  EXPECT_EQ(fs::path(rp.dir).filename(), "step_000003");
  EXPECT_EQ(rp.step, 3);
  EXPECT_EQ(rp.note, "");
  rp = variant("no_latest", [](const fs::path& d) { fs::remove(d / "latest"); });
  EXPECT_EQ(rp.step, 3);
  EXPECT_NE(rp.note.find("is missing"), std::string::npos) << rp.note;
  rp = variant("garbage", [](const fs::path& d) { std::ofstream(d / "latest") << "../x/y\n"; });
  EXPECT_EQ(rp.step, 3);
  EXPECT_NE(rp.note.find("not a checkpoint name"), std::string::npos) << rp.note;
  rp = variant("older", [](const fs::path& d) { std::ofstream(d / "latest") << "step_000001\n"; });
  EXPECT_EQ(rp.step, 3) << "a save killed before it moved `latest` still counts";
  rp = variant("no_meta", [](const fs::path& d) { fs::remove(d / "step_000003/meta.json"); });
  EXPECT_EQ(rp.step, 2);
  EXPECT_NE(rp.note.find("step_000003"), std::string::npos) << rp.note;
  rp = variant("newer", [](const fs::path& d) {
    fs::copy(d / "step_000003", d / "step_000005");
    fs::remove(d / "step_000005/meta.json");
  });
  EXPECT_EQ(rp.step, 3);
  const std::string newer = rp.dir.substr(0, rp.dir.size() - 1) + "5";
  EXPECT_EQ(rp.note,
            "newer checkpoint folder 'step_000005' is incomplete; taking the "
            "newest complete checkpoint, '" +
                rp.dir + "'\n  checkpoint '" + newer +
                "': cannot open meta.json (not a checkpoint directory, or an incomplete one)");
  rp = variant("renamed", [](const fs::path& d) {
    fs::copy(d / "step_000003", d / "step_000009", fs::copy_options::recursive);
  });
  EXPECT_EQ(rp.step, 3) << "a folder is ranked by the step its meta.json records";
  EXPECT_NE(rp.note.find("step_000009/meta.json' records step 3, but its folder is named for "
                         "step 9"),
            std::string::npos)
      << rp.note;
  rp = variant("corrupt", [](const fs::path& d) {
    fs::resize_file(d / "step_000003/replicated.safetensors", 10);
  });
  EXPECT_EQ(rp.step, 2);
  EXPECT_NE(rp.note.find("replicated.safetensors"), std::string::npos) << rp.note;
  // Nothing ever saved: start from scratch. Traces but nothing complete: an error. A file
  // in the way: an error (saves would fail there), not "nothing saved yet".
  EXPECT_EQ(zero::find_resume_point(tmp / "nothing").dir, "");
  std::ofstream(tmp / "a_file") << "x\n";
  expect_error([&] { zero::find_resume_point(tmp / "a_file"); },
               "'" + tmp / "a_file" + "' is a file, not a folder of checkpoints");
  fs::create_directories(tmp / "traces");
  std::ofstream(tmp / "traces/latest") << "step_000007\n";
  // Only `latest` left (the step folders removed): named, with the way out.
  expect_error([&] { zero::find_resume_point(tmp / "traces"); },
               "'latest' names 'step_000007', but no step folder is left (removed?). Delete '" +
                   tmp / "traces/latest" + "' to start over there");
  fs::create_directories(tmp / "traces/step_000007");
  expect_error([&] { zero::find_resume_point(tmp / "traces"); }, "no complete checkpoint");
}

// A meta.json whose step or file table is not what a save writes is damage like any other:
// the resume passes the folder over, naming the file and the field (a negative step once
// ranked the folder below older ones, silently; a string gave a bare JSON type error).
TEST(CheckpointRobustness, AMetaJsonWithABadStepOrFileTableIsNamed) {
  TempDir tmp;
  const std::string base = tmp / "base";
  save_steps(base, 3);
  auto resume_past = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                         const std::string& needle) {
    expect_passed_over(base, fs::path(tmp.path) / name, edit, "': " + needle);
  };
  resume_past(
      "string", [](auto& m) { m["step"] = "3"; }, "'step' must be an integer >= 0, got \"3\"");
  resume_past(
      "missing", [](auto& m) { m.erase("step"); }, "'step' must be an integer >= 0, got none");
  resume_past(
      "negative", [](auto& m) { m["step"] = -3; }, "'step' must be an integer >= 0, got -3");
  resume_past(
      "no_files", [](auto& m) { m["files"] = nlohmann::json::array(); },
      "'files' must be an object of file names and their digests, got []");
  resume_past(
      "digest", [](auto& m) { m["files"]["replicated.safetensors"] = 7; },
      "the digest of 'replicated.safetensors' in 'files' must be a string, got 7");
}

// Nesting no save writes is refused before anything recurses into it (200,000 levels once
// overflowed the stack while an error message serialized the value): the resume passes the
// folder over like any other damaged one, and the load names the depth. A value nested
// within the limit is quoted by its type and size.
TEST(CheckpointRobustness, ADeeplyNestedMetaJsonIsPassedOver) {
  TempDir tmp;
  const std::string base = tmp / "base";
  save_steps(base, 3);
  const fs::path deep = fs::path(tmp.path) / "deep";
  const std::string nested = std::string(200000, '[') + std::string(200000, ']');
  fs::copy(base, deep, fs::copy_options::recursive);
  edit_meta((deep / "step_000003").string(), [](auto& m) { m["step"] = "nest here"; });
  const fs::path meta = deep / "step_000003/meta.json";
  std::string text = nlohmann::json::parse(std::ifstream(meta)).dump(1);
  text.replace(text.find("\"nest here\""), 11, nested);
  std::ofstream(meta, std::ios::trunc) << text;
  const std::string named = "'" + meta.string() + "' nests 200001 levels deep";
  const zero::ResumePoint rp = zero::find_resume_point(deep.string());
  EXPECT_EQ(rp.step, 2);
  EXPECT_NE(rp.note.find(named), std::string::npos) << rp.note.substr(0, 400);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 7);
    expect_error([&] { zero::load_checkpoint(*e, (deep / "step_000003").string()); }, named);
  });
  expect_passed_over(
      base, fs::path(tmp.path) / "shallow",
      [](auto& m) { m["step"] = nlohmann::json::array({nlohmann::json::array({3})}); },
      "': 'step' must be an integer >= 0, got an array of 1 element");
}

// A meta.json that reads but disagrees with its own world size (its rank files intact, so
// every digest matches) is damage too: the resume passes it over, as the load would refuse it.
TEST(CheckpointRobustness, AMetaJsonAtOddsWithItsWorldSizeIsPassedOver) {
  TempDir tmp;
  const std::string base = tmp / "base";
  save_steps(base, 3);
  auto resume_past = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                         const std::string& needle) {
    const fs::path step3 = expect_passed_over(base, fs::path(tmp.path) / name, edit, needle);
    comm::run_threads(2, [&](comm::Communicator& comm) {
      auto e = make_engine(comm, lesson::make_mixed, 7);
      expect_error([&] { zero::load_checkpoint(*e, step3.string()); }, needle);
    });
  };
  resume_past(
      "one", [](auto& m) { m["world_size"] = 1; },
      "' has world_size 1 but lists 2 rank files (one per rank)");
  resume_past(
      "three", [](auto& m) { m["world_size"] = 3; },
      "' has world_size 3 but lists 2 rank files (one per rank)");
  resume_past(
      "renamed",
      [](auto& m) {
        m["files"]["rank_00002.safetensors"] = m["files"]["rank_00001.safetensors"];
        m["files"].erase("rank_00001.safetensors");
      },
      "' has world_size 2 but lists no rank_00001.safetensors");
  resume_past(
      "shape",
      [](auto& m) {
        m["tensors"][0]["shape"] = {4, -3};
      },
      "': 'conv3.weight' needs a shape of sizes >= 0 and an integer shard_numel");
  // A size no int64 holds, in an entry that is not sharded: compared with the model's
  // layout, it was converted to int64 unchecked.
  resume_past(
      "buffer_shape",
      [](auto& m) {
        m["tensors"].push_back(
            {{"name", "extra"}, {"kind", "buffer"}, {"dtype", "f32"}, {"shape", {1e300}}});
      },
      "': 'extra' needs a shape of sizes >= 0");
  // A count that rounding up to whole shards would overflow.
  resume_past(
      "huge", [](auto& m) { m["tensors"][0]["shape"] = {std::numeric_limits<int64_t>::max()}; },
      "': 'conv3.weight' has a shape of 9223372036854775807 elements, more than a tensor holds");
  resume_past(
      "world_size", [](auto& m) { m["world_size"] = "2"; },
      "': world_size must be an integer >= 1, got string");
  // One rank's layout, its file table cut to match: rank_00000's digest still matches.
  resume_past(
      "layout",
      [](auto& m) {
        m["world_size"] = 1;
        m["files"].erase("rank_00001.safetensors");
      },
      "': 'conv3.weight' has shard_numel 54, expected 108 for 108 elements at world_size 1");
}

TEST(CheckpointRobustness, AppStateTravelsWithTheCheckpointAndErrorsNameOnePlace) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    train_step(*e, 0);
    zero::CheckpointExtra x;
    x.state.emplace_back("counts", from_vector({3.0, 1.0, 4.0}, {3}, DType::i64));
    zero::save_checkpoint(*e, root, "step_000001", x);
    auto f = make_engine(comm, lesson::make_mixed, 6);
    zero::CheckpointExtra got = zero::load_checkpoint(*f, root);
    ASSERT_EQ(got.state.size(), 1u);
    EXPECT_EQ(got.state[0].first, "counts");
    EXPECT_EQ(got.state[0].second.to_vector(), (std::vector<double>{3, 1, 4}));
  });
  // A rank file gone: one error, located once (not "checkpoint.cpp:N: checkpoint.cpp:M:");
  // the message names no source file unless ZT_DEBUG asks for locations.
  fs::remove(fs::path(root) / "step_000001/rank_00001.safetensors");
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5);
    try {
      zero::load_checkpoint(*e, root);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& err) {
      const std::string m = err.what();
      EXPECT_EQ(m.find("checkpoint.cpp:"), std::string::npos) << m;
      const size_t first = m.find("missing rank_00001.safetensors");
      ASSERT_NE(first, std::string::npos) << m;
      EXPECT_EQ(m.find("missing rank_00001.safetensors", first + 1), std::string::npos) << m;
    }
  });
}
