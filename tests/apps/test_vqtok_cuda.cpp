// vqtok on a GPU (skipped without one): train.device=cuda takes one rank per process (or
// one thread rank), and a step replayed from a CUDA graph follows the eager steps.
#include <map>
#include <string>

#include "apps/app_test_util.h"
#include "apps/common/train_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/gpu_skip.h"
#include "common/test_util.h"
#include "core/work_counts.h"

using namespace zt;

namespace {

config::AppConfig tiny_config(const std::string& out_dir, std::vector<std::string> sets = {}) {
  return apptest::tiny_vqtok_config(out_dir, std::move(sets));
}

std::string fresh_dir(const std::string& name) {
  return apptest::fresh_dir("zt_vqtok_cuda", name);
}

}  // namespace

// With a GPU, train.device=cuda takes one rank per process (or one thread rank) and
// gives a CUDA device.
TEST(VqtokApp, TrainDeviceRuleOnTheGpu) {
  ZT_GPU_OR_SKIP("train.device=cuda needs one");
  const auto cuda = tiny_config(fresh_dir("dev"), {"train.device=cuda"});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    EXPECT_TRUE(test::throws_with([&] { app::train_device(cuda.train, comm, "vqtok train"); },
                                  "one rank per process"));
  });
  comm::run_threads(1, [&](comm::Communicator& comm) {
    EXPECT_TRUE(app::train_device(cuda.train, comm, "t").is_cuda());
  });
}

// train.cuda_graph: two eager warm-up steps, then the captured step replayed, give the
// eager run's losses (cuDNN's backward algorithms may add in another order from run to
// run, so 1e-5 relative rather than bits) and the same number of optimizer steps.
TEST(VqtokApp, CudaGraphTrainingFollowsEagerTrainingOnTheGpu) {
  ZT_GPU_OR_SKIP("train.cuda_graph needs a GPU");
  std::map<bool, vqtok::TrainResult> results;
  std::map<bool, int64_t> dispatches;  // kernel-table calls on the rank's thread
  for (const bool graphed : {false, true}) {
    const auto cfg = tiny_config(fresh_dir(graphed ? "graphed" : "eager"),
                                 {"train.device=cuda", "train.steps=6", "train.log_every=1",
                                  "train.eval_every=0", "train.checkpoint_every=0",
                                  std::string("train.cuda_graph=") + (graphed ? "true" : "false")});
    comm::run_threads(1, [&](comm::Communicator& comm) {
      vqtok::TrainOptions o;
      o.quiet = true;
      const WorkCounts before = work_counts();
      results[graphed] = vqtok::train(cfg, o, comm);
      dispatches[graphed] = (work_counts() - before).dispatches;
    });
  }
  apptest::expect_losses_follow(results[false].log_losses, results[true].log_losses, 6);
  EXPECT_EQ(results[true].steps, 6);
  // The graph was used: 2 warm-up steps and the capture dispatch kernels, the 3 replays
  // none (about half the eager run's, which dispatches in all 6).
  EXPECT_LT(dispatches[true], dispatches[false] * 3 / 4)
      << dispatches[true] << " vs " << dispatches[false];
}
