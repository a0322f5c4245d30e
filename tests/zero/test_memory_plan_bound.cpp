// The memory planner's gathered peak is a bound (zt's plan report calls it a hard one, and
// the apps check a memory limit against it): whatever the persistence threshold and the
// prefetch window, a run never measures more gathered bytes than plan_memory predicted.
// The cases here are the ones where the engine holds more than the parameters' own bytes:
// a persistent parameter gathered alone keeps its padded all-gather buffer, a group of
// persistent parameters is cut out of a flat buffer held beside their copies while the
// step re-gathers them, and a prefetch window that covers the whole model holds every
// group's flat buffer at once.
#include <random>

#include "zero/lesson_util.h"
#include "zero/memory_plan.h"

using namespace zt;

namespace {

// A Linear(6 -> 3) (a group of two) beside a root group of one trainable element.
class LinearAndScale : public nn::UnaryModule {
 public:
  LinearAndScale() : nn::UnaryModule("LinearAndScale") {
    lin = register_module("lin", std::make_shared<nn::Linear>(6, 3));
    scale = register_parameter("scale", randn({1}));
  }
  std::shared_ptr<nn::Linear> lin;
  Tensor scale;

 protected:
  Tensor forward(const Tensor& x) override { return mul((*lin)(x), scale); }
};

// Three Linear(8 -> 8) layers; the last (no bias of its own) also registers the first's
// weight and the second's bias: in the backward, which runs it first, its one all-gather
// brings all three.
class Borrower : public nn::UnaryModule {
 public:
  Borrower() : nn::UnaryModule("Borrower") {
    a = register_module("a", std::make_shared<nn::Linear>(8, 8));
    b = register_module("b", std::make_shared<nn::Linear>(8, 8));
    c = register_module("c", std::make_shared<nn::Linear>(nn::LinearOptions(8, 8).bias(false)));
    c->register_parameter("lent", a->weight);
    c->register_parameter("lent_bias", b->bias);
  }
  std::shared_ptr<nn::Linear> a, b, c;

 protected:
  Tensor forward(const Tensor& x) override { return (*c)(tanh((*b)(tanh((*a)(x))))); }
};

// LoRA-style: a frozen bf16 base (35 elements: padded at every world size here) beside two
// f32 adapters, then a Linear: the module is gathered with one all-gather per dtype, so the
// base alone in its own keeps its padding.
class Adapted : public nn::UnaryModule {
 public:
  Adapted() : nn::UnaryModule("Adapted") {
    base = register_parameter("base", randn({5, 7}).to(DType::bf16), /*requires_grad=*/false);
    down = register_parameter("down", mul(randn({2, 7}), 0.1));
    up = register_parameter("up", mul(randn({5, 2}), 0.1));
    head = register_module("head", std::make_shared<nn::Linear>(5, 30));
  }
  Tensor base, down, up;
  std::shared_ptr<nn::Linear> head;

 protected:
  Tensor forward(const Tensor& x) override {
    return (*head)(add(linear(x, base.to(DType::f32)), linear(linear(x, down), up)));
  }
};

// A random module tree (seeded): up to three children a level, three levels deep, each
// module with up to three parameters of 0 to 59 elements, some frozen, some borrowed from
// an earlier module (tied), some modules checkpointed. Each parameter is used in the
// module's forward.
class RandomTree : public nn::UnaryModule {
 public:
  RandomTree(std::mt19937& rng, int depth, std::vector<Tensor>& built)
      : nn::UnaryModule("RandomTree") {
    const int params = static_cast<int>(rng() % 4);
    for (int i = 0; i < params; ++i) {
      const std::string name = "p" + std::to_string(i);
      if (!built.empty() && rng() % 6 == 0) {
        used.push_back(register_parameter(name, built[rng() % built.size()]));
        continue;
      }
      const int64_t n = rng() % 3 == 0 ? rng() % 5 : rng() % 60;
      used.push_back(register_parameter(name, randn({n}), /*requires_grad=*/rng() % 5 != 0));
      built.push_back(used.back());
    }
    const int children = depth > 0 ? static_cast<int>(rng() % 4) : 0;
    for (int c = 0; c < children; ++c)
      kids.push_back(register_module("c" + std::to_string(c),
                                     std::make_shared<RandomTree>(rng, depth - 1, built)));
    if (rng() % 4 == 0) set_checkpointing(true);
  }
  std::vector<Tensor> used;
  std::vector<std::shared_ptr<RandomTree>> kids;

 protected:
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const Tensor& p : used) h = add(h, mul(sum(p.to(DType::f32)), 0.01));
    for (auto& k : kids) h = tanh((*k)(h));
    return h;
  }
};

// Plans, then measures two steps after the first, at each world size; the plan must hold.
template <typename M>
void expect_plan_bounds_peak(const std::string& what, const zero::Config& cfg,
                             std::function<std::shared_ptr<M>()> build, int64_t in) {
  for (int N : {2, 3, 4}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(1);
      std::shared_ptr<M> m;
      {
        zero::Init init(comm);
        m = build();
      }
      const zero::MemoryPlan plan = zero::plan_memory(*m, N, cfg);
      zero::Engine engine(m, comm, cfg, {});
      const Tensor x = randn({2, in});
      const zero::MemoryReport r = zero::measure_memory(
          engine, [&] { return sum(engine(x)); }, 3);
      EXPECT_GE(plan.gathered_peak, r.gathered_param_peak)
          << what << " at N=" << N << ": planned " << plan.gathered_peak << " B, measured "
          << r.gathered_param_peak << " B";
    });
  }
}

std::shared_ptr<lesson::TanhStack> layers() {
  return std::make_shared<lesson::TanhStack>(4, 9);  // four groups of 81 + 9 elements
}

}  // namespace

TEST(MemoryPlanBound, PersistentGroupsReGatheredAfterTheStep) {
  // The defaults keep every parameter of this model gathered (persistent): the step
  // re-gathers them a group at a time, each through a flat buffer beside its copies.
  expect_plan_bounds_peak<lesson::TanhStack>("persistent layers", zero::Config{}, layers, 9);
}

TEST(MemoryPlanBound, APersistentParameterGatheredAloneKeepsItsPadding) {
  // The bias (3 elements) is persistent and alone in its group's gather: its gathered
  // value is its padded all-gather buffer (4 elements at N = 2 and 4).
  zero::Config cfg = lesson::eager_release_config();
  cfg.stage3_param_persistence_threshold = 8;
  expect_plan_bounds_peak<LinearAndScale>(
      "a persistent bias", cfg, [] { return std::make_shared<LinearAndScale>(); }, 6);
}

TEST(MemoryPlanBound, APrefetchWindowOverTheWholeModel) {
  // Every layer is in flight at once: four flat buffers, then a layer's copies beside them.
  expect_plan_bounds_peak<lesson::TanhStack>("whole-model prefetch", lesson::prefetch_config(),
                                             layers, 9);
}

TEST(MemoryPlanBound, ModulesKeptForReuseUpToTheWholeModel) {
  // Kept from forward to backward (the bound reaches past the model): every layer's copies,
  // and the flat buffer of the last one fetched beside them.
  zero::Config cfg;
  cfg.stage3_param_persistence_threshold = 0;
  cfg.stage3_prefetch_bucket_size = 0;
  expect_plan_bounds_peak<lesson::TanhStack>("kept for reuse", cfg, layers, 9);
}

TEST(MemoryPlanBound, BuffersBuiltUnderInitAreNotGatheredParameters) {
  // A BatchNorm's running statistics, built inside zero::Init's scope, are whole on every
  // rank (the planner counts them as replicated): with nothing left gathered after a step,
  // the report's gathered bytes are 0, and the peak is the parameters' alone.
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = lesson::partitioned<lesson::TokenizerLike>(comm);
    const zero::Config cfg = lesson::eager_release_config();
    const zero::MemoryPlan plan = zero::plan_memory(*m, 2, cfg);
    ASSERT_GT(plan.replicated, 0) << "the BatchNorm's buffers";
    zero::Engine engine(m, comm, cfg, {});
    const Tensor x = randn({2, 3, 4, 6, 6});
    const zero::MemoryReport r = zero::measure_memory(engine, [&] { return mean(engine(x)); });
    EXPECT_EQ(r.gathered_param, 0) << "nothing is gathered between steps (eager release)";
    EXPECT_GE(plan.gathered_peak, r.gathered_param_peak);
  });
}

TEST(MemoryPlanBound, AWholeModelWindowWithTiedWeights) {
  // Forward gathers the lent tensors with their own modules, backward with the borrower:
  // whichever module brings a tied tensor, the window holds it once.
  expect_plan_bounds_peak<Borrower>(
      "tied weights under a whole-model prefetch", lesson::prefetch_config(),
      [] { return std::make_shared<Borrower>(); }, 8);
}

TEST(MemoryPlanBound, AModuleGatheredOncePerStorageDtype) {
  // Re-gathered after the step (everything persistent): the base, alone in its bf16
  // all-gather, is held padded while the head's flat buffer comes beside it.
  expect_plan_bounds_peak<Adapted>(
      "a bf16 base beside f32 adapters", zero::Config{}, [] { return std::make_shared<Adapted>(); },
      7);
}

TEST(MemoryPlanBound, RandomModelsAndSettings) {
  // Bucket sizes of 0 and 1 element, bounds below one parameter, persistence of everything
  // or nothing, bf16, gradient accumulation, two to four ranks: the model states are what
  // the planner says, and the gathered peak stays within its bound.
  const int64_t sizes[] = {0, 1, 10, 50, 100, 200, 1'000'000};
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 pick(seed);
    zero::Config cfg;
    cfg.stage3_prefetch_bucket_size = sizes[pick() % 7];
    cfg.stage3_max_live_parameters = sizes[1 + pick() % 6];
    cfg.stage3_max_reuse_distance = pick() % 2 ? 0 : sizes[pick() % 7];
    cfg.stage3_param_persistence_threshold = sizes[pick() % 4];
    cfg.reduce_bucket_size = sizes[1 + pick() % 6];
    cfg.precision.bf16 = pick() % 3 == 0;
    cfg.gradient_accumulation_steps = 1 + static_cast<int>(pick() % 2);
    const int N = 2 + static_cast<int>(pick() % 3);
    comm::run_threads(N, [&](comm::Communicator& comm) {
      manual_seed(seed);
      std::mt19937 rng(seed);
      std::vector<Tensor> built;
      std::shared_ptr<RandomTree> m;
      {
        zero::Init init(comm);
        m = std::make_shared<RandomTree>(rng, 3, built);
      }
      bool trains = false;
      for (const auto& [name, p] : m->named_parameters()) trains = trains || p.requires_grad();
      if (!trains) return;  // nothing to step
      const zero::MemoryPlan plan = zero::plan_memory(*m, N, cfg);
      zero::Engine engine(m, comm, cfg, {});
      const Tensor x = randn({2, 3});
      const zero::MemoryReport r = zero::measure_memory(
          engine, [&] { return sum(engine(x)); }, 3);
      if (comm.rank() != 0) return;
      EXPECT_EQ(plan.model_state(), r.model_state()) << "seed " << seed;
      EXPECT_GE(plan.gathered_peak, r.gathered_param_peak) << "seed " << seed << ", N=" << N;
    });
  }
}
