// The memory planner (zero/memory_plan.h): predicted per-rank model states are what a
// short run measures, exactly, and the gathered bytes within 10%, for the tiny tokenizer
// and a small transformer at N = 1, 2, 4 thread ranks (at N = 1 the gathered bytes are
// none: one rank computes with its shards in place); `vqtok plan` for a config (with a
// trainable replica, gradient accumulation, fp16's skipped steps); element bounds too
// large to multiply; the verdict against memory.limit, the host's included; and the host's
// memory, checked before the first step.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "apps/app_test_util.h"
#include "apps/common/host_memory.h"
#include "apps/vqgpt/model/gpt.h"
#include "apps/vqgpt/vqgpt_app.h"
#include "apps/vqtok/model/vq_model.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/gpu_skip.h"
#include "common/test_util.h"
#include "core/allocator.h"
#include "zero/memory_plan.h"
#include "zero/zero.h"

using namespace zt;

namespace {

config::ModelConfig tiny_tokenizer() {
  config::ModelConfig m;
  m.codebook_size = 64;
  m.ch = 32;
  m.ch_mult = {1, 1, 1, 1};
  m.num_res_blocks = 1;
  return m;
}

gpt::GptSpec small_gpt() {
  gpt::GptSpec s;
  s.vocab_size = 96;
  s.block_size = 16;
  s.n_layer = 2;
  s.n_head = 2;
  s.n_embd = 32;
  return s;
}

zero::Config plan_config() {
  zero::Config c;
  c.stage3_param_persistence_threshold = 0;
  c.stage3_max_reuse_distance = 0;
  c.stage3_prefetch_bucket_size = 0;
  return c;
}

void expect_close(int64_t predicted, int64_t measured, const std::string& what) {
  EXPECT_GT(measured, 0) << what;
  EXPECT_LE(std::abs(static_cast<double>(predicted - measured)), 0.1 * measured)
      << what << ": predicted " << predicted << " B, measured " << measured << " B";
}

// Builds the model on `world` thread ranks, plans it, trains two steps and compares.
template <typename Build, typename Loss>
void check(const std::string& name, int world, const zero::Config& cfg, Build build, Loss loss) {
  comm::run_threads(world, [&](comm::Communicator& comm) {
    manual_seed(1);
    std::shared_ptr<nn::Module> model;
    {
      zero::Init init(comm);
      model = build();
    }
    zero::Engine engine(model, comm, cfg, {});
    const zero::MemoryPlan plan = zero::plan_memory(*model, world, cfg);
    const zero::MemoryReport got = zero::measure_memory(engine, [&] { return loss(engine); });
    if (comm.rank() != 0) return;
    const std::string what = name + " at N=" + std::to_string(world);
    EXPECT_EQ(plan.model_state(), got.model_state()) << what << " model states";
    if (world > 1) {
      expect_close(plan.gathered_peak, got.gathered_param_peak, what + " gathered peak");
    } else {  // one rank computes with its shards in place: nothing is gathered
      EXPECT_EQ(plan.gathered_peak, 0) << what;
      EXPECT_EQ(got.gathered_param_peak, 0) << what << " (buffers are charged as other)";
    }
  });
}

Tensor gpt_loss(zero::Engine& e) {
  std::vector<double> v;
  for (int i = 0; i < 16; ++i) v.push_back((7 * i) % 96);
  Tensor y = e(from_vector(v, {1, 16}, DType::i64));
  return mean(mul(y, y)).to(DType::f32);
}

/// The repository whose configs/ the tests read: $ZT_REPO where set (a GPU machine runs
/// a packed build, away from the source tree it was built from), else that source tree.
std::string repo_dir() {
  const char* repo = std::getenv("ZT_REPO");
  return repo != nullptr && *repo != '\0' ? repo : ZT_SOURCE_DIR;
}

/// configs/vqgpt_tiny.yaml on train.device=cuda, batch 2.
config::AppConfig vqgpt_on_cuda(const std::string& name) {
  return config::load_app_config(
      repo_dir() + "/configs/vqgpt_tiny.yaml",
      {"output_dir=" + apptest::fresh_dir("plan", name), "train.device=cuda", "train.batch=2"},
      config::App::vqgpt);
}
}  // namespace

TEST(MemoryPlan, PredictionsForTokenizerAndTransformer) {
  for (int world : {1, 2, 4}) {
    check(
        "tiny tokenizer", world, plan_config(),
        [] { return std::make_shared<vq::VqModel>(tiny_tokenizer()); },
        [](zero::Engine& e) {
          Generator g(3);
          std::vector<Tensor> out = e.forward({randn({1, 4, 3, 16, 16}, g)});
          return add(mean(mul(out[0], out[0])), out[2]);
        });
    check(
        "gpt", world, plan_config(), [] { return std::make_shared<gpt::Gpt>(small_gpt()); },
        gpt_loss);
  }
}

// bf16 storage with fp32 masters (18 B per parameter), persistent small parameters and a
// prefetch window.
TEST(MemoryPlan, Bf16PersistenceAndPrefetchWindow) {
  zero::Config c = plan_config();
  c.precision.bf16 = true;
  c.stage3_param_persistence_threshold = 1000;
  c.stage3_prefetch_bucket_size = 20000;
  check(
      "gpt bf16", 2, c, [] { return std::make_shared<gpt::Gpt>(small_gpt()); }, gpt_loss);
  auto plain = std::make_shared<gpt::Gpt>(small_gpt());
  const int64_t n = small_gpt().count_parameters();
  EXPECT_EQ(zero::plan_memory(*plain, 1, c).model_state(), 18 * n) << "2 + 4 + 4 + 8 B/param";
  EXPECT_EQ(zero::plan_memory(*plain, 1, plan_config()).model_state(), 16 * n) << "16 B/param";
}

// `vqtok plan` on the tiny config at 2 thread ranks: model states predicted exactly, the
// gathered peak and the activation estimate (the traced step's peak) within 10% of what
// the later steps measured; a per-rank limit far below the need
// does not stop the plan (it is lifted while measuring) and is back in force afterwards.
TEST(MemoryPlan, VqtokPlanForAConfig) {
  const config::AppConfig cfg =
      apptest::tiny_vqtok_config(apptest::fresh_dir("plan", "vqtok"), {"memory.limit=1MiB"});
  comm::LaunchOptions launch;
  launch.ranks = 2;
  launch.memory_limit = cfg.memory_limit;
  comm::launch(launch, [&](comm::Communicator& comm) {
    const app::PlanResult r = vqtok::plan(cfg, comm, 2, /*quiet=*/true);
    EXPECT_EQ(r.plan.world, 2);
    EXPECT_EQ(r.plan.model_state(), r.measured.model_state());
    expect_close(r.plan.gathered_peak, r.measured.gathered_param_peak, "gathered peak");
    expect_close(r.activation_estimate, r.measured.activation_peak, "activation estimate");
    EXPECT_GT(r.predicted_total(), cfg.memory_limit) << "the tiny model needs more than 1 MiB";
    EXPECT_EQ(r.limit, cfg.memory_limit);
    EXPECT_FALSE(r.fits());
    EXPECT_EQ(current_ledger()->limit(Device::cpu()), cfg.memory_limit) << "limit restored";
  });
}

// A trainable replica (`replicated: [encoder]`) is whole on every rank, and so is its
// optimizer state (AdamW's two moments, on the device even with offload_optimizer): the
// plan counts that state in the model states, which are the measured ones to the byte.
// Its gradient, whole too, lives from backward to step among the activations.
TEST(MemoryPlan, VqtokPlanWithATrainableReplicatedEncoder) {
  const config::AppConfig cfg = apptest::tiny_vqtok_config(apptest::fresh_dir("plan", "replicated"),
                                                           {"replicated=[encoder]"});
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const app::PlanResult r = vqtok::plan(cfg, comm, 2, /*quiet=*/true);
    EXPECT_EQ(r.plan.optim_state, r.measured.optim_state);
    EXPECT_EQ(r.plan.model_state(), r.measured.model_state());
    EXPECT_GT(r.plan.replica_grad, 0);
    EXPECT_LT(r.plan.replica_grad, r.plan.replicated) << "the encoder's f32 parameters, no buffer";
  });
}

// A planned step is a whole accumulation window, and the measured steps go on until as
// many updates were applied: with gradient_accumulation_steps 4 (three step() calls were
// no update), or with fp16 skipping its first steps for overflows (a loss scale of 2^24),
// the optimizer's moments exist when the model states are measured.
TEST(MemoryPlan, TheMeasuredStepsApplyTheirUpdates) {
  for (const std::string set :
       {"train.gradient_accumulation_steps=4", "fp16.initial_scale_power=24"}) {
    SCOPED_TRACE(set);
    std::vector<std::string> sets = {set};
    if (set.rfind("fp16", 0) == 0) sets.push_back("train.dtype=f16");
    const config::AppConfig cfg =
        apptest::tiny_vqtok_config(apptest::fresh_dir("plan", "updates"), sets);
    comm::run_threads(2, [&](comm::Communicator& comm) {
      const app::PlanResult r = vqtok::plan(cfg, comm, 2, /*quiet=*/true);
      EXPECT_EQ(r.steps, 2);
      EXPECT_EQ(r.updates, 2);
      EXPECT_TRUE(r.complete());
      EXPECT_EQ(r.plan.model_state(), r.measured.model_state());
    });
  }
}

// Where every step overflows (a fixed fp16 loss scale far too large), the plan stops after
// a bounded number of steps and says that its measured model states are incomplete.
TEST(MemoryPlan, APlanWhoseUpdatesAreAllSkippedSaysSo) {
  const config::AppConfig cfg = apptest::tiny_vqtok_config(
      apptest::fresh_dir("plan", "skipped"), {"train.dtype=f16", "fp16.loss_scale=1e30"});
  app::PlanResult r;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  comm::run_threads(1, [&](comm::Communicator& comm) { r = vqtok::plan(cfg, comm, 1, false); });
  const std::string out = ::testing::internal::GetCapturedStdout();
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.steps, 1);
  EXPECT_EQ(r.updates, 0);
  EXPECT_FALSE(r.complete());
  EXPECT_NE(out.find("measured: only 0 of 1 steps applied an update"), std::string::npos) << out;
  EXPECT_NE(out.find("the measured model states and peaks are incomplete"), std::string::npos);
  EXPECT_NE(out.find("\"complete\":false"), std::string::npos) << out;
}

// stage3_max_live_parameters and stage3_prefetch_bucket_size far past the model bound no
// more than the whole model: the plan caps them there before it multiplies them into bytes.
TEST(MemoryPlan, ElementBoundsPastTheModelAreCappedBeforeTheyBecomeBytes) {
  auto model = std::make_shared<gpt::Gpt>(small_gpt());
  for (int64_t reuse : {0, 1}) {
    zero::Config c;
    c.stage3_max_reuse_distance = reuse;
    const zero::MemoryPlan usual = zero::plan_memory(*model, 2, c);
    c.stage3_max_live_parameters = std::numeric_limits<int64_t>::max() / 2;
    c.stage3_prefetch_bucket_size = std::numeric_limits<int64_t>::max();
    const zero::MemoryPlan huge = zero::plan_memory(*model, 2, c);
    EXPECT_GT(usual.gathered_peak, 0);
    EXPECT_EQ(huge.gathered_peak, usual.gathered_peak) << "the whole model either way";
  }
}

// The verdict is on the limit the run would meet, whoever set it: here the ledger's (as
// $ZT_MEMORY_LIMIT sets it), with no memory.limit in the config.
TEST(MemoryPlan, TheVerdictReadsTheLimitTheRunWouldMeet) {
  const config::AppConfig cfg = apptest::tiny_vqtok_config(apptest::fresh_dir("plan", "env"));
  ASSERT_EQ(cfg.memory_limit, 0);
  comm::run_threads(1, [&](comm::Communicator& comm) {
    current_ledger()->set_limit(Device::cpu(), int64_t{1} << 20);
    const app::PlanResult r = vqtok::plan(cfg, comm, 1, /*quiet=*/true);
    EXPECT_EQ(r.limit, int64_t{1} << 20);
    EXPECT_FALSE(r.fits()) << "the tiny model needs more than 1 MiB";
    current_ledger()->set_limit(Device::cpu(), 0);
  });
}

// Before a run allocates, the ranks on each host are held to its memory: thread ranks of
// one process add up, and so do processes on one host (mpirun's -np 4 on one machine), each
// process's held bytes once; other hosts are counted apart. The error names the process,
// or the host and its processes, that cannot allocate what its ranks are about to. A model
// that cannot even be built there is refused before it is, naming the model.
TEST(MemoryPlan, AHostThatCannotHoldWhatItsRanksWouldAllocateIsRefusedBeforeTheyDo) {
  using app::HostNeed;
  const int64_t gib = int64_t{1} << 30;
  const std::vector<HostNeed> apart = {{1, 6 * gib, gib, 8 * gib, "a"},
                                       {2, 6 * gib, gib, 8 * gib, "b"}};
  EXPECT_EQ(app::host_fit_error(apart, "x"), "") << "7 GiB of 8 per host";
  const std::vector<HostNeed> together = {{1, 6 * gib, gib, 8 * gib, "a"},
                                          {1, 6 * gib, gib, 8 * gib, "a"}};
  const std::string e = app::host_fit_error(together, "the model states");
  EXPECT_NE(e.find("the model states do not fit the host's memory: the process of rank 0 (2 "
                   "ranks) holds 1.00 GiB and would allocate 12.00 GiB more, past the machine's "
                   "8.00 GiB"),
            std::string::npos)
      << e;
  // Two processes of one rank each on host "a": 2 x 1 GiB held, 2 x 3 GiB to come, past 7.
  const std::vector<HostNeed> processes = {{1, 3 * gib, gib, 7 * gib, "a"},
                                           {2, 3 * gib, gib, 7 * gib, "a"},
                                           {3, 3 * gib, gib, 7 * gib, "b"}};
  const std::string p = app::host_fit_error(processes, "x");
  EXPECT_NE(p.find("x do not fit the host's memory: the 2 processes on host 'a' (2 ranks, the "
                   "first rank 0) hold 2.00 GiB and would allocate 6.00 GiB more, past the "
                   "machine's 7.00 GiB"),
            std::string::npos)
      << p;
  // A process's held bytes count once, however many of its ranks report them.
  const std::vector<HostNeed> held_once = {{1, 2 * gib, 3 * gib, 8 * gib, "a"},
                                           {1, 2 * gib, 3 * gib, 8 * gib, "a"}};
  EXPECT_EQ(app::host_fit_error(held_once, "x"), "") << "3 + 4 GiB of 8";
  const std::vector<HostNeed> second = {{1, gib, gib, 8 * gib, "a"},
                                        {2, 8 * gib, gib, 8 * gib, "b"}};
  EXPECT_NE(app::host_fit_error(second, "x").find("rank 1 (1 rank)"), std::string::npos);
  EXPECT_EQ(app::host_fit_error({{1, 64 * gib, 0, 0, "a"}}, "x"), "") << "memory unknown";

  ASSERT_GT(host_memory_bytes(), 0);
  const int64_t too_many = host_memory_bytes() / 4 + 1;  // f32 elements past the host
  comm::run_threads(2, [&](comm::Communicator& comm) {
    EXPECT_NO_THROW(app::check_host_can_build(too_many, false, Device::cuda(0), comm, "m"))
        << "a GPU's allocations fail at once";
    EXPECT_NO_THROW(app::check_host_can_build(too_many / 4, false, Device::cpu(), comm, "m"));
    // Replicated, every rank builds all of them: about half as many fit partitioned, not
    // whole.
    const int64_t half = too_many / 2 + 1;
    EXPECT_NO_THROW(app::check_host_can_build(half, false, Device::cpu(), comm, "m"));
    EXPECT_TRUE(test::throws_with(
        [&] { app::check_host_can_build(half, true, Device::cpu(), comm, "the encoder"); },
        "the encoder's f32 parameters (" + std::to_string(half) +
            " elements, whole on every rank) do not fit the host's memory"));
    EXPECT_TRUE(test::throws_with(
        [&] { app::check_host_can_build(too_many, false, Device::cpu(), comm, "the GPT"); },
        "the GPT's f32 parameters (" + std::to_string(too_many) +
            " elements, partitioned) do not fit the host's memory: the process of rank 0 (2 "
            "ranks)"));
  });
  // A real plan fits this machine and passes the check on every rank.
  const config::AppConfig cfg = apptest::tiny_vqtok_config(apptest::fresh_dir("plan", "host"));
  comm::run_threads(2, [&](comm::Communicator& comm) {
    EXPECT_NO_THROW(vqtok::plan(cfg, comm, 1, /*quiet=*/true));
  });
}

// A rank's host bytes still to come: on the CPU its model states, gathered parameters and
// replicas, on a GPU its offloaded optimizer's host bytes; less what the process's
// allocator holds already, and never below 0.
TEST(MemoryPlan, TheHostBytesToComeAreThePlansLessWhatIsHeld) {
  const int64_t gib = int64_t{1} << 30;
  zero::MemoryPlan p;
  p.param_shard = 1 * gib;
  p.grad_shard = 2 * gib;
  p.optim_state = 4 * gib;
  p.gathered_peak = 8 * gib;
  p.replicated = 16 * gib;
  p.optim_state_host = 32 * gib;
  p.grad_shard_host = 64 * gib;
  p.staging_host = 128 * gib;
  const Tensor kept = zeros({1024}, DType::f32);  // something held
  const int64_t held = memory_stats(Device::cpu()).total_current;
  ASSERT_GT(held, 0);
  EXPECT_EQ(app::host_bytes_to_come(p, Device::cpu()), 31 * gib - held);
  EXPECT_EQ(app::host_bytes_to_come(p, Device::cuda(0)), 224 * gib - held);
  EXPECT_EQ(app::host_bytes_to_come(zero::MemoryPlan{}, Device::cpu()), 0) << "less than held";
}

// `vqgpt plan` on the shipped tiny config (a random tokenizer stands in: no checkpoint is
// needed to count bytes): model states exact, the frozen tokenizer counted as replicated.
TEST(MemoryPlan, VqgptPlanForTheTinyConfig) {
  const config::AppConfig cfg = config::load_app_config(
      std::string(ZT_SOURCE_DIR) + "/configs/vqgpt_tiny.yaml",
      {"output_dir=" + apptest::fresh_dir("plan", "vqgpt"), "train.batch=2"}, config::App::vqgpt);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    const app::PlanResult r = vqgpt::plan(cfg, comm, 1, /*quiet=*/true);
    EXPECT_EQ(r.plan.model_state(), r.measured.model_state());
    EXPECT_GE(r.plan.replicated, 4 * vq::VqModel::count_parameters(cfg.model))
        << "the tokenizer's fp32 parameters are whole on every rank";
    expect_close(r.activation_estimate, r.measured.activation_peak, "activation estimate");
  });
}

// A plan writes nothing: not the timeline train.trace asks a training run for (a path that
// may name one of the run's inputs), and vqgpt's plan, whose tokenizer is random, needs no
// gpt.tokenizer_checkpoint.
TEST(MemoryPlan, APlanWritesNoTraceAndNeedsNoTokenizer) {
  const std::string dir = apptest::fresh_dir("plan", "writes_nothing");
  const config::AppConfig tok = apptest::tiny_vqtok_config(dir, {"train.trace=" + dir + "/t.json"});
  const config::AppConfig gpt =
      config::load_app_config(std::string(ZT_SOURCE_DIR) + "/configs/vqgpt_tiny.yaml",
                              {"output_dir=" + dir, "train.batch=2", "gpt.tokenizer_checkpoint=''",
                               "train.trace=" + dir + "/g.json"},
                              config::App::vqgpt);
  comm::run_threads(1, [&](comm::Communicator& comm) {
    vqtok::plan(tok, comm, 1, /*quiet=*/true);
    vqgpt::plan(gpt, comm, 1, /*quiet=*/true);
  });
  EXPECT_FALSE(std::filesystem::exists(dir + "/t.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/g.json"));
}

// `vqgpt plan --device cuda` sets the device up as `vqgpt train` does (app::train_device):
// where no GPU can be used, the error names the plan, why and the fix, rather than a plan
// of a CPU run presented as the GPU's. (With a GPU, the next test makes the plan there.)
TEST(MemoryPlan, VqgptPlanSetsUpTheDeviceAsTrainingDoes) {
  const std::string why = app::cuda_missing();
  if (why.empty()) GTEST_SKIP() << "a GPU is visible: VqgptPlanOnTheGpuMeasuresItsModelStates";
  const config::AppConfig cfg = vqgpt_on_cuda("cuda");
  comm::run_threads(1, [&](comm::Communicator& comm) {
    EXPECT_TRUE(
        test::throws_with([&] { vqgpt::plan(cfg, comm, 1, /*quiet=*/true); },
                          "vqgpt plan: train.device 'cuda' " + why + ", or set train.device=cpu"));
  });
}

// With a GPU, `vqgpt plan --device cuda` makes the plan there, and its model states are
// the measured ones.
TEST(MemoryPlan, VqgptPlanOnTheGpuMeasuresItsModelStates) {
  ZT_GPU_OR_SKIP("a plan on the GPU needs one");
  const config::AppConfig cfg = vqgpt_on_cuda("gpu");
  comm::run_threads(1, [&](comm::Communicator& comm) {
    const app::PlanResult r = vqgpt::plan(cfg, comm, 1, /*quiet=*/true);
    EXPECT_EQ(r.plan.model_state(), r.measured.model_state());
  });
}

// On a GPU with offload_optimizer the optimizer state lives in host memory, which
// memory.limit caps as well: the verdict holds the host's share to the host limit, apart
// from the device's: the larger of the predicted state, gradient buffers and bf16/f16
// staging copies, and the measured peak of all the host's ledger held (what its limit
// caps). (Numbers as a plan on a GPU reports them; without a GPU the share is 0.)
TEST(MemoryPlan, AnOffloadedOptimizerIsHeldToTheHostLimit) {
  app::PlanResult r;
  EXPECT_EQ(r.host_needed(), 0) << "nothing offloaded";
  r.plan.param_shard = 100;
  r.plan.optim_state_host = 800;
  r.plan.grad_shard_host = 200;
  r.plan.staging_host = 100;
  r.measured.total_peak = 150;
  r.measured.optim_state_host = 800;
  r.measured.grad_shard_host = 200;
  r.measured.host_total_peak = 1060;
  // Each limit must hold what is needed and the margin a training run holds beside the
  // measured step (1%, at least 256 KiB).
  const int64_t margin = app::PlanResult::margin(150);
  EXPECT_EQ(margin, 256 << 10);
  r.limit = 150 + margin - 1;
  EXPECT_FALSE(r.fits()) << "needed 150 B fits 150 B + the margin - 1 only too tightly";
  r.limit = 150 + margin;
  EXPECT_EQ(r.needed(), 150);
  EXPECT_EQ(r.host_needed(), 1100) << "the planned staging copies count";
  EXPECT_TRUE(r.fits()) << "no host limit: the device's alone";
  r.host_limit = 1050;
  EXPECT_FALSE(r.fits()) << "1100 B of optimizer on a 1050 B host";
  r.measured.host_total_peak = 1500;
  r.host_limit = 1200;
  EXPECT_EQ(r.host_needed(), 1500) << "all the host held (its data too)";
  EXPECT_FALSE(r.fits());
  r.host_limit = 1500 + app::PlanResult::margin(1500);
  EXPECT_TRUE(r.fits());
  r.limit = 100;
  EXPECT_FALSE(r.fits()) << "the device's limit still counts";
}
