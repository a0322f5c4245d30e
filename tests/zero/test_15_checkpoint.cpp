// Lesson 15 — checkpoints.
// Invariant: a checkpoint IS the training state. Training 2k steps equals training k,
// saving, loading into a fresh engine and training k more — bit for bit at the same world
// size, and to float rounding at another one (the shards are re-sliced; only the order of
// reductions changes). The export loads into a plain, unpartitioned model.
//
// What is in one (zero/checkpoint.h): a directory per save,
//   <root>/<tag>/rank_00000.safetensors ...  each rank's shards ([shard_numel] each):
//                                            "param/<name>", "master/<name>" (fp32, where
//                                            kept apart), "optim/<name>.<slot>", with the
//                                            scalar "optim/<name>.step"; under buffers.sync
//                                            none, the rank's own "buffer/<name>" (lesson 12)
//   <root>/<tag>/replicated.safetensors      replicated parameters, every persistent buffer
//                                            (rank 0's), the replicas' optimizer state and
//                                            the app's "state/<name>" (written by rank 0)
//   <root>/<tag>/meta.json                   world size, step, config, each parameter's
//                                            shape and partition layout, file digests
//   <root>/latest                            the tag of the newest checkpoint
// Because meta.json records each partition, a load at another world size can cut every
// rank's new shards out of the old rank files.
//
// How saves stay safe (complete-or-absent, damaged files refused before anything changes,
// resume points, stale temporaries) is tested in test_checkpoint_robustness.cpp.
#include <algorithm>

#include "nn/safetensors.h"
#include "nn/state_dict.h"
#include "zero/checkpoint_util.h"

using namespace zt;
using lesson::entries;
using lesson::expect_same;
using lesson::full_state;
using lesson::make_engine;
using lesson::Named;
using lesson::TempDir;
using lesson::train_step;

TEST(Lesson15Checkpoint, SameWorldSizeResumeIsBitExact) {
  TempDir tmp;
  std::vector<Named> straight(2), resumed(2);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_net, 5);
    for (int s = 0; s < 4; ++s) {
      if (s == 2) e->set_lr(2.5e-3);
      train_step(*e, s);
    }
    straight[comm.rank()] = full_state(*e);
  });
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_net, 5);
    for (int s = 0; s < 2; ++s) train_step(*e, s);
    e->set_lr(2.5e-3);  // set by hand (a plateau schedule): saved with the optimizer state
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
  // Rank 0's file holds its shards of each parameter and of Adam's moments (conv3's
  // 108-element weight over 2 ranks: 54 each); the replicated file the BatchNorm's buffers.
  const nn::SafetensorsFile rank0(tmp / "step_000002/rank_00000.safetensors");
  for (const char* key : {"param/mixed.conv3.weight", "optim/mixed.conv3.weight.exp_avg",
                          "optim/mixed.conv3.weight.exp_avg_sq"})
    EXPECT_EQ(rank0.info(key).shape, (Shape{zero::make_partition(108, 2).shard_numel})) << key;
  const nn::SafetensorsFile replicated(tmp / "step_000002/replicated.safetensors");
  EXPECT_EQ(replicated.info("buffer/bn.running_mean").shape, (Shape{3}));
  comm::run_threads(2, [&](comm::Communicator& comm) {
    // Another seed: every value must come from the checkpoint.
    auto e = make_engine(comm, lesson::make_net, 99);
    zero::CheckpointExtra x = zero::load_checkpoint(*e, tmp.path);  // found through latest
    EXPECT_EQ(x.step, 2);
    EXPECT_EQ(x.config_yaml, "model: net\n");
    EXPECT_EQ(x.loader_epoch, 1);
    EXPECT_EQ(x.loader_position, 12);
    EXPECT_EQ(x.user.at("run"), "lesson15");
    EXPECT_EQ(x.saved_world_size, 2);
    EXPECT_EQ(e->global_step(), 2);
    EXPECT_EQ(e->optimizer().step_count(), 2);
    EXPECT_EQ(e->lr(), 2.5e-3);
    for (int s = 2; s < 4; ++s) train_step(*e, s);
    EXPECT_EQ(e->global_step(), 4);
    EXPECT_EQ(e->optimizer().step_count(), 4);
    resumed[comm.rank()] = full_state(*e);
  });
  for (int r = 0; r < 2; ++r) expect_same(resumed[r], straight[r], 0.0, 0.0);
}

namespace {

// Trains make_mixed for 4 steps at `saved_at` ranks, saving after 2, then resumes that
// checkpoint at `resumed_at` ranks (from another seed) for the last 2: both end alike.
void expect_resume_matches(int saved_at, int resumed_at, const zero::Config& cfg,
                           const std::string& optimizer = "adamw") {
  TempDir tmp;
  Named straight, resumed;
  comm::run_threads(saved_at, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 5, cfg, optimizer);
    for (int s = 0; s < 2; ++s) train_step(*e, s);
    zero::save_checkpoint(*e, tmp.path, "mid");
    for (int s = 2; s < 4; ++s) train_step(*e, s);
    Named st = full_state(*e);
    if (comm.rank() == 0) straight = st;
  });
  comm::run_threads(resumed_at, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_mixed, 99, cfg, optimizer);
    EXPECT_EQ(zero::load_checkpoint(*e, tmp / "mid").saved_world_size, saved_at);
    EXPECT_EQ(e->optimizer().step_count(), 2);
    for (int s = 2; s < 4; ++s) train_step(*e, s);
    Named st = full_state(*e);
    if (comm.rank() == 0) resumed = st;
  });
  SCOPED_TRACE(optimizer + ", saved at " + std::to_string(saved_at) + ", resumed at " +
               std::to_string(resumed_at));
  expect_same(resumed, straight, 1e-5, 1e-6);
}

}  // namespace

TEST(Lesson15Checkpoint, ResumeAtAnotherWorldSizeReslicesShards) {
  for (auto [saved_at, resumed_at] : {std::pair{2, 3}, std::pair{3, 2}})
    expect_resume_matches(saved_at, resumed_at, lesson::eager_release_config());
}

// The same for SGD's momentum buffers and for AdamW's state kept on the host
// (offload_optimizer), with clipping, between one and two ranks and at two: the state is
// re-sliced as the parameters are, and the resumed run follows the straight one.
TEST(Lesson15Checkpoint, MomentumAndOffloadedStateResumeAtOneOrTwoRanks) {
  for (const bool offload : {false, true}) {
    zero::Config cfg;
    cfg.gradient_clipping = 0.05;
    if (offload) cfg.offload_optimizer.device = zero::OffloadDevice::kCpu;
    SCOPED_TRACE(offload ? "offload_optimizer" : "state beside the parameters");
    for (auto [saved_at, resumed_at] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}})
      expect_resume_matches(saved_at, resumed_at, cfg, offload ? "adamw" : "sgd");
  }
}

TEST(Lesson15Checkpoint, ExportLoadsIntoPlainModel) {
  TempDir tmp;
  const std::string path = tmp / "export/model.safetensors";
  const Tensor x = lesson::batch(4, 77).first;
  Tensor engine_out;
  Named engine_state;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, lesson::make_net, 5);
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
  auto plain = std::make_shared<lesson::Net>(nullptr);
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

// A non-persistent buffer (a mask or cache the model rebuilds from its config) is no part
// of the training state, as in PyTorch and DeepSpeed: not saved, and a resumed model keeps
// the one it built, even of another size.
TEST(Lesson15Checkpoint, ANonPersistentBufferIsRebuiltNotSaved) {
  TempDir tmp;
  auto with_cache = [](int64_t n) {
    return [n](comm::Communicator& comm) {
      std::shared_ptr<nn::Module> m = lesson::make_net(comm);
      m->register_buffer("cache", full({n}, static_cast<double>(n)), /*persistent=*/false);
      return m;
    };
  };
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, with_cache(3), 5);
    train_step(*e, 0);
    zero::save_checkpoint(*e, tmp.path, "ck");
  });
  EXPECT_FALSE(nn::SafetensorsFile(tmp / "ck/replicated.safetensors").contains("buffer/cache"));
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto e = make_engine(comm, with_cache(5), 6);
    zero::load_checkpoint(*e, tmp / "ck");
    const Named buffers = e->module().named_buffers();
    auto cache = std::find_if(buffers.begin(), buffers.end(),
                              [](const auto& nb) { return nb.first == "cache"; });
    ASSERT_NE(cache, buffers.end());
    EXPECT_TRUE(zt::test::values_are(cache->second, {5, 5, 5, 5, 5})) << "as built";
    train_step(*e, 1);
  });
}
