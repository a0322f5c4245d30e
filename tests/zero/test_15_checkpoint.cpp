// Lesson 15 — checkpoints.
// Invariant: a checkpoint IS the training state. Training 2k steps equals training k,
// saving, loading into a fresh engine and training k more — bit for bit at the same world
// size, and to float rounding at another one (the shards are re-sliced; only the order of
// reductions changes). A checkpoint appears only when complete; a missing, corrupt or
// foreign one is refused before anything in the engine changes; a failed save leaves the
// previous checkpoint intact; the export loads into a plain, unpartitioned model. A resume
// point is the newest complete checkpoint whatever `latest` says; temporaries of saves
// whose process died are removed at the next save; app state travels with the checkpoint.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/checkpoint.h"
#include "zero/lesson_util.h"

using namespace zt;
namespace fs = std::filesystem;
using Named = std::vector<std::pair<std::string, Tensor>>;

namespace {

constexpr int64_t kGlobalBatch = 6;  // splits evenly over 2 and 3 ranks

// Mixed behind a replicated, trainable BatchNorm3d: partitioned parameters, a trainable
// replica with its own optimizer state, and buffers that change every step.
class Net : public nn::UnaryModule {
 public:
  // comm: null for a plain model.
  explicit Net(comm::Communicator* comm) : nn::UnaryModule("Net") {
    if (comm) {
      zero::Replicated rep(*comm);
      bn = register_module("bn", std::make_shared<nn::BatchNorm3d>(3));
    } else {
      bn = register_module("bn", std::make_shared<nn::BatchNorm3d>(3));
    }
    mixed = register_module("mixed", std::make_shared<lesson::Mixed>());
  }
  std::shared_ptr<nn::BatchNorm3d> bn;
  std::shared_ptr<lesson::Mixed> mixed;

 protected:
  Tensor forward(const Tensor& x) override { return (*mixed)((*bn)(x)); }
};

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

using Factory = std::function<std::shared_ptr<nn::Module>(comm::Communicator&)>;
const Factory kMixed = [](comm::Communicator&) { return std::make_shared<lesson::Mixed>(); };
const Factory kNet = [](comm::Communicator& c) { return std::make_shared<Net>(&c); };

std::unique_ptr<zero::Engine> make_engine(comm::Communicator& comm, const Factory& make,
                                          uint64_t seed, zero::Config cfg = {},
                                          const std::string& optimizer = "adamw") {
  manual_seed(seed);
  std::shared_ptr<nn::Module> m;
  {
    zero::Init init(comm);
    m = make(comm);
  }
  zero::OptimizerConfig o;
  o.type = optimizer;
  o.momentum = 0.9;
  o.lr = 1e-2;
  o.weight_decay = 0.01;
  return std::make_unique<zero::Engine>(m, comm, cfg, o);
}

// One step on this rank's slice of global batch `step` (the same data at any world size).
void train_step(zero::Engine& e, int step) {
  auto [x, y] = lesson::batch(kGlobalBatch, 100 + step);
  int64_t b = kGlobalBatch / e.comm().size(), off = b * e.comm().rank();
  e.backward(mse_loss(e(x.narrow(0, off, b)), y.narrow(0, off, b)));
  EXPECT_TRUE(e.step());
}

// Full parameters and buffers, cloned.
Named full_state(zero::Engine& e) {
  Named out = lesson::full_parameters(e.module(), e.comm());
  for (auto& [n, b] : e.module().named_buffers()) out.emplace_back(n, b.detach().clone());
  return out;
}

void expect_same(const Named& a, const Named& b, double rtol, double atol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first);
    EXPECT_CLOSE(a[i].second, b[i].second, rtol, atol) << a[i].first;
  }
}

// Runs f, expecting a zt::Error whose message contains `needle`.
void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A fresh directory under /tmp, removed with everything in it.
struct TempDir {
  TempDir() {
    char t[] = "/tmp/zt_lesson15_XXXXXX";
    ZT_CHECK(mkdtemp(t) != nullptr, "mkdtemp failed");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& p) const { return (fs::path(path) / p).string(); }
  std::string path;
};

// Names in `dir`, sorted ("." entries included).
std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::string read_latest(const std::string& root) {
  std::ifstream f(fs::path(root) / "latest");
  std::string tag;
  f >> tag;
  return tag;
}

}  // namespace

TEST(Lesson15Checkpoint, SameWorldSizeResumeIsBitExact) {
  TempDir tmp;
  std::vector<Named> straight(2), resumed(2);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kNet, 5);
    for (int s = 0; s < 4; ++s) train_step(*e, s);
    straight[comm.rank()] = full_state(*e);
  });
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kNet, 5);
    for (int s = 0; s < 2; ++s) train_step(*e, s);
    zero::CheckpointExtra x;
    x.config_yaml = "model: net\n";
    x.loader_epoch = 1;
    x.loader_position = 12;
    x.user["run"] = "lesson15";
    std::string dir = zero::save_checkpoint(*e, tmp.path, zero::checkpoint_tag(2), x);
    EXPECT_EQ(dir, tmp / "step_000002");
  });
  EXPECT_EQ(entries(tmp.path), (std::set<std::string>{"latest", "step_000002"}));
  EXPECT_EQ(entries(tmp / "step_000002"),
            (std::set<std::string>{"meta.json", "rank_00000.safetensors", "rank_00001.safetensors",
                                   "replicated.safetensors"}));
  comm::run_threads(2, [&](comm::Communicator& comm) {
    // Another seed: every value must come from the checkpoint.
    auto e = make_engine(comm, kNet, 99);
    zero::CheckpointExtra x = zero::load_checkpoint(*e, tmp.path);  // found through latest
    EXPECT_EQ(x.step, 2);
    EXPECT_EQ(x.config_yaml, "model: net\n");
    EXPECT_EQ(x.loader_epoch, 1);
    EXPECT_EQ(x.loader_position, 12);
    EXPECT_EQ(x.user.at("run"), "lesson15");
    EXPECT_EQ(x.saved_world_size, 2);
    EXPECT_EQ(e->global_step(), 2);
    EXPECT_EQ(e->optimizer().step_count(), 2);
    for (int s = 2; s < 4; ++s) train_step(*e, s);
    EXPECT_EQ(e->global_step(), 4);
    EXPECT_EQ(e->optimizer().step_count(), 4);
    resumed[comm.rank()] = full_state(*e);
  });
  for (int r = 0; r < 2; ++r) expect_same(resumed[r], straight[r], 0.0, 0.0);
}

TEST(Lesson15Checkpoint, ResumeAtAnotherWorldSizeReslicesShards) {
  for (auto worlds : {std::pair{2, 3}, std::pair{3, 2}}) {
    const int saved_at = worlds.first, resumed_at = worlds.second;  // lambdas capture these
    TempDir tmp;
    Named straight, resumed;
    zero::Config cfg = lesson::eager_release_config();
    comm::run_threads(saved_at, [&](comm::Communicator& comm) {
      auto e = make_engine(comm, kMixed, 5, cfg);
      for (int s = 0; s < 2; ++s) train_step(*e, s);
      zero::save_checkpoint(*e, tmp.path, "mid");
      for (int s = 2; s < 4; ++s) train_step(*e, s);
      Named st = full_state(*e);
      if (comm.rank() == 0) straight = st;
    });
    comm::run_threads(resumed_at, [&](comm::Communicator& comm) {
      auto e = make_engine(comm, kMixed, 99, cfg);
      EXPECT_EQ(zero::load_checkpoint(*e, tmp / "mid").saved_world_size, saved_at);
      EXPECT_EQ(e->optimizer().step_count(), 2);
      for (int s = 2; s < 4; ++s) train_step(*e, s);
      Named st = full_state(*e);
      if (comm.rank() == 0) resumed = st;
    });
    SCOPED_TRACE("saved at " + std::to_string(saved_at) + ", resumed at " +
                 std::to_string(resumed_at));
    expect_same(resumed, straight, 1e-5, 1e-6);
  }
}

TEST(Lesson15Checkpoint, BadCheckpointIsRefusedAndChangesNothing) {
  TempDir tmp;
  const std::string good = tmp / "ckpt/step_000001";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kMixed, 5);
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

  auto refused = [&](const Factory& make, const std::string& dir, const std::string& needle,
                     const std::string& optimizer = "adamw") {
    comm::run_threads(2, [&](comm::Communicator& comm) {
      auto e = make_engine(comm, make, 7, {}, optimizer);
      Named before = full_state(*e);
      expect_error([&] { zero::load_checkpoint(*e, dir); }, needle);
      expect_same(full_state(*e), before, 0.0, 0.0);
      EXPECT_EQ(e->optimizer().step_count(), 0);
      EXPECT_EQ(e->global_step(), 0);
      train_step(*e, 0);  // the engine still trains
    });
  };
  refused(kMixed, missing, "missing rank_00001.safetensors");
  refused(kMixed, truncated, "rank_00000.safetensors");
  refused(kMixed, flipped, "is corrupt");
  refused(kMixed, tmp / "nowhere", "no checkpoint at");
  refused([](comm::Communicator&) { return std::make_shared<MixedPlus>(); }, good,
          "'extra.weight' (partitioned f32 [3, 5]) is in this model but not in the checkpoint");
  refused([](comm::Communicator&) { return std::make_shared<Reshaped>(); }, good,
          "'conv3.weight' is partitioned f32 [4, 3, 1, 3, 3] in the checkpoint but partitioned "
          "f32 [5, 3, 1, 1, 1] in this model");
  refused(kMixed, good, "optimizer load_state_dict failed", "sgd");
}

TEST(Lesson15Checkpoint, FailedSaveLeavesPreviousCheckpoint) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  Named at_step1;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kMixed, 5);
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
    expect_error([&] { zero::save_checkpoint(*e, root, "step_000002"); }, "is in the way");
    expect_error([&] { zero::save_checkpoint(*e, tmp / "plain_file/ckpt", "step_000002"); },
                 "save_checkpoint");
  });
  // No temporary directory is left; latest still names the previous checkpoint.
  EXPECT_EQ(entries(root), (std::set<std::string>{"latest", "step_000001", "step_000002"}));
  EXPECT_TRUE(fs::is_regular_file(fs::path(root) / "step_000002"));
  EXPECT_EQ(read_latest(root), "step_000001");
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kMixed, 99);
    zero::load_checkpoint(*e, root);
    Named st = full_state(*e);
    if (comm.rank() == 0) expect_same(st, at_step1, 0.0, 0.0);
  });
}

TEST(Lesson15Checkpoint, KeepLastKeepsNewest) {
  TempDir tmp;
  EXPECT_FALSE(zero::has_checkpoint(tmp.path));
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kMixed, 5);
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

TEST(Lesson15Checkpoint, ExportLoadsIntoPlainModel) {
  TempDir tmp;
  const std::string path = tmp / "export/model.safetensors";
  const Tensor x = lesson::batch(4, 77).first;
  Tensor engine_out;
  Named engine_state;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kNet, 5);
    for (int s = 0; s < 2; ++s) train_step(*e, s);
    zero::export_consolidated(*e, path);
    e->module().eval();
    autograd::NoGradGuard ng;
    Tensor out = (*e)(x);
    Named st = full_state(*e);
    if (comm.rank() == 0) {
      engine_out = out.detach().clone();
      engine_state = st;
    }
  });
  nn::SafetensorsFile f(path);
  for (const std::string& k : f.keys())
    if (k.find("num_batches_tracked") == std::string::npos) {
      EXPECT_EQ(f.info(k).dtype, DType::f32) << k;
    }
  manual_seed(123);
  auto plain = std::make_shared<Net>(nullptr);
  nn::load_state_dict(*plain, nn::load_safetensors(path), /*strict=*/true);
  for (const auto& entry : engine_state) {
    const std::string& n = entry.first;
    Named sd = nn::state_dict(*plain);
    auto it = std::find_if(sd.begin(), sd.end(), [&](const auto& kv) { return kv.first == n; });
    ASSERT_NE(it, sd.end()) << n;
    EXPECT_CLOSE(it->second, entry.second, 0.0, 0.0) << n;
  }
  plain->eval();
  autograd::NoGradGuard ng;
  EXPECT_CLOSE((*plain)(x), engine_out, 1e-6, 1e-6);
}

namespace {

// Saves steps 1..n of a 2-rank run under root.
void save_steps(const std::string& root, int n) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kMixed, 5);
    for (int s = 0; s < n; ++s) {
      train_step(*e, s);
      zero::save_checkpoint(*e, root, zero::checkpoint_tag(e->global_step()));
    }
  });
}

// The pid of a process that has exited (and was reaped).
pid_t dead_pid() {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return p;
}

}  // namespace

TEST(Lesson15Checkpoint, ResumePointIsTheNewestCompleteCheckpoint) {
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
  rp = variant("corrupt", [](const fs::path& d) {
    fs::resize_file(d / "step_000003/replicated.safetensors", 10);
  });
  EXPECT_EQ(rp.step, 2);
  EXPECT_NE(rp.note.find("replicated.safetensors"), std::string::npos) << rp.note;
  // Nothing ever saved: start from scratch. Traces but nothing complete: an error.
  EXPECT_EQ(zero::find_resume_point(tmp / "nothing").dir, "");
  fs::create_directories(tmp / "traces");
  std::ofstream(tmp / "traces/latest") << "step_000007\n";
  expect_error([&] { zero::find_resume_point(tmp / "traces"); }, "no complete checkpoint");
}

TEST(Lesson15Checkpoint, StaleTemporariesAreRemovedWhenTheirProcessIsGone) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  save_steps(root, 1);
  const std::string dead = std::to_string(dead_pid());
  const std::string live = std::to_string(getppid());
  // Exited but not reaped (as the killed ranks of an mpirun job stay until their adopter
  // reaps them): gone, although kill(pid, 0) still finds it.
  const pid_t zombie_pid = fork();
  if (zombie_pid == 0) _exit(0);
  while (true) {  // wait until it has exited, without reaping it
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(zombie_pid), &info, WEXITED | WNOWAIT) == 0) break;
  }
  const std::string zombie = std::to_string(zombie_pid);
  auto make_dir = [&](const std::string& name) {
    fs::create_directories(fs::path(root) / name);
    std::ofstream(fs::path(root) / name / "rank_00000.safetensors") << "partial";
  };
  make_dir(".step_000002.tmp-" + dead + "-0badf00d");             // killed save: removed
  make_dir(".step_000003.tmp-" + live + "-0badf00d");             // a live process's: kept
  make_dir(".step_000004.tmp-p" + dead + "-hzzzzzzzz-0badf00d");  // another machine's: kept
  make_dir(".step_000005.tmp-" + zombie + "-0badf00d");           // an exited process's: removed
  std::ofstream(fs::path(root) / (".latest.tmp-" + dead + "-0badf00d")) << "step_0000";
  // Killed between moving step 1 aside and putting its replacement in place.
  fs::rename(fs::path(root) / "step_000001", fs::path(root) / (".step_000001.old-" + dead + "-1"));
  const auto removed = zero::remove_stale_temporaries(root);
  waitpid(zombie_pid, nullptr, 0);
  EXPECT_EQ(removed.size(), 4u);
  EXPECT_EQ(entries(root), (std::set<std::string>{
                               "latest", "step_000001", ".step_000003.tmp-" + live + "-0badf00d",
                               ".step_000004.tmp-p" + dead + "-hzzzzzzzz-0badf00d"}));
  EXPECT_NO_THROW(zero::verify_checkpoint(root + "/step_000001"));
  // The next save removes a dead process's temporary by itself.
  make_dir(".step_000009.tmp-" + dead + "-0badf00d");
  save_steps(root, 1);
  EXPECT_FALSE(fs::exists(fs::path(root) / (".step_000009.tmp-" + dead + "-0badf00d")));
}

// A save over a damaged checkpoint of its step (one a resume passed over) keeps the damaged
// folder under another name: its intact files may still be wanted.
TEST(Lesson15Checkpoint, ASaveOverADamagedCheckpointKeepsIt) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  save_steps(root, 2);
  fs::resize_file(fs::path(root) / "step_000002/rank_00001.safetensors", 10);
  save_steps(root, 2);  // saves steps 1 and 2 again
  EXPECT_NO_THROW(zero::verify_checkpoint(root + "/step_000002"));
  int kept = 0;
  for (const std::string& name : entries(root))
    if (name.rfind("step_000002.incomplete-", 0) == 0) {
      ++kept;
      EXPECT_EQ(fs::file_size(fs::path(root) / name / "rank_00001.safetensors"), 10u);
      EXPECT_TRUE(fs::exists(fs::path(root) / name / "rank_00000.safetensors"));
    }
  EXPECT_EQ(kept, 1);
}

TEST(Lesson15Checkpoint, AppStateTravelsWithTheCheckpointAndErrorsNameOnePlace) {
  TempDir tmp;
  const std::string root = tmp / "ckpt";
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kMixed, 5);
    train_step(*e, 0);
    zero::CheckpointExtra x;
    x.state.emplace_back("counts", from_vector({3.0, 1.0, 4.0}, {3}, DType::i64));
    zero::save_checkpoint(*e, root, "step_000001", x);
    auto f = make_engine(comm, kMixed, 6);
    zero::CheckpointExtra got = zero::load_checkpoint(*f, root);
    ASSERT_EQ(got.state.size(), 1u);
    EXPECT_EQ(got.state[0].first, "counts");
    EXPECT_EQ(got.state[0].second.to_vector(), (std::vector<double>{3, 1, 4}));
  });
  // A rank file gone: one error, located once (not "checkpoint.cpp:N: checkpoint.cpp:M:");
  // the message names no source file unless ZT_DEBUG asks for locations.
  fs::remove(fs::path(root) / "step_000001/rank_00001.safetensors");
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, kMixed, 5);
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
