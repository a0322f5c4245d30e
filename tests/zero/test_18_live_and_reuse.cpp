// Lesson 18 — the two bounds on gathered parameters.
// Invariant (stage3_max_live_parameters): prefetching never holds more gathered elements
// than the bound: the gathered-parameter peak is at most the bound plus what a fetch
// needs on demand (the module, the ancestors it runs inside and, for a module of several
// parameters, its full copies while they are cut out of its flat buffer: lesson 16), and
// the persistent parameters; only prefetches stop at the bound. An unbounded prefetch
// window gathers the whole model at once.
// Invariant (stage3_max_reuse_distance): a module whose parameters come back in fewer
// than that many elements (a layer applied twice in a row, which comes back after 0
// elements; a distance of 0 turns reuse off) is not released in between:
// fewer all-gathers for the same result. Kept modules count against
// stage3_max_live_parameters too: past it, a module is released even if it comes back
// soon (with the default reuse distance every module comes back for its backward, and
// would otherwise keep the whole model gathered at the forward/backward turn).
// zt differs from DeepSpeed here on purpose: DeepSpeed's stage3_max_live_parameters only
// limits prefetching, and a module kept for reuse stays gathered whatever the count; zt
// releases kept modules past the bound too, so the bound really bounds the gathered peak.
#include "zero/lesson_util.h"
#include "zero/memory_plan.h"

using namespace zt;

namespace {
constexpr int64_t kWidth = 32;  // each weight: 1024 fp32 elements

// `depth` square layers (bias-free unless `bias`), each applied `repeat` times in a row.
class Stack : public nn::UnaryModule {
 public:
  Stack(int depth, int repeat, bool bias = false) : nn::UnaryModule("Stack"), repeat_(repeat) {
    for (int i = 0; i < depth; ++i)
      layers.push_back(register_module(
          "l" + std::to_string(i),
          std::make_shared<nn::Linear>(nn::LinearOptions(kWidth, kWidth).bias(bias))));
  }
  std::vector<std::shared_ptr<nn::Linear>> layers;

 protected:
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& l : layers)
      for (int k = 0; k < repeat_; ++k) h = tanh((*l)(h));
    return h;
  }

 private:
  int repeat_;
};

// Trains two steps (the first records the trace) and returns the gathered-parameter
// peak of the second step in bytes.
int64_t second_step_gathered_peak(comm::Communicator& comm, zero::Engine& engine) {
  Tensor x = ones({2, kWidth});
  engine.backward(sum(engine(x)));
  engine.step();
  reset_peak_memory();
  engine.backward(sum(engine(x)));
  engine.step();
  return engine.memory_report().gathered_param_peak;
}
}  // namespace

TEST(Lesson18LiveAndReuse, MaxLiveParametersBoundsTheGatheredPeak) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    const int64_t weight_bytes = kWidth * kWidth * 4;
    const int64_t bound = 2 * kWidth * kWidth;  // two weights, in elements
    std::vector<int64_t> peaks, planned;
    for (int64_t max_live : {int64_t{1'000'000'000}, bound}) {
      std::shared_ptr<Stack> m = lesson::partitioned<Stack>(comm, 6, 1);
      zero::Config cfg = lesson::eager_release_config();
      cfg.stage3_prefetch_bucket_size = 1'000'000;  // the window covers the whole model
      cfg.stage3_max_live_parameters = max_live;
      planned.push_back(zero::plan_memory(*m, 2, cfg).gathered_peak);
      zero::Engine engine(m, comm, cfg, {});
      peaks.push_back(second_step_gathered_peak(comm, engine));
      EXPECT_GT(engine.stats().prefetches_issued, 0);
    }
    EXPECT_EQ(peaks[0], 6 * weight_bytes) << "unbounded: the first fetch prefetches all 6";
    // Bounded, the peak is at most the bound plus the module fetched on demand: what the
    // memory planner (lesson 10) predicts before anything runs. This run reaches the bound
    // only: the first module of a step is fetched while nothing else is gathered, and
    // every later one was prefetched, inside the bound, before it. (Each layer here is one
    // weight and the root holds no parameters, so a fetch adds neither a copy-out nor
    // ancestors; the next test adds biases.)
    EXPECT_EQ(planned[0], peaks[0]);
    EXPECT_EQ(planned[1], bound * 4 + weight_bytes);
    EXPECT_EQ(peaks[1], bound * 4);
  });
}

// A second engine on a model starts its count from nothing gathered: the copies an earlier
// engine left gathered (its persistent parameters) are released by the new one, not taken
// off a count that never held them, which would raise its bound by as much.
TEST(Lesson18LiveAndReuse, ASecondEnginesBoundHoldsWhereTheFirstLeftCopiesGathered) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Stack> m = lesson::partitioned<Stack>(comm, 6, 1);
    { zero::Engine first(m, comm, zero::Config{}, {}); }  // its defaults: all six persist
    ASSERT_TRUE(m->layers[0]->weight.has_storage()) << "left gathered by the first engine";
    const int64_t bound = 2 * kWidth * kWidth;  // two weights, in elements
    zero::Config cfg = lesson::eager_release_config();
    cfg.stage3_prefetch_bucket_size = 1'000'000;  // the window covers the whole model
    cfg.stage3_max_live_parameters = bound;
    zero::Engine engine(m, comm, cfg, {});
    EXPECT_EQ(second_step_gathered_peak(comm, engine), bound * 4);
  });
}

// A layer with a bias is a group of two members, gathered with one all-gather into a flat
// buffer and copied out of it (lesson 16): while a layer is cut out, its flat buffer and
// its copies are both held, so the peak passes the bound by one layer. The planner
// allows for the worst case, a fetch on demand at the bound (its flat buffer and its
// copies on top of it): two layers more.
TEST(Lesson18LiveAndReuse, ACopyOutComesOnTopOfTheBound) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    const int64_t layer = kWidth * (kWidth + 1);  // weight and bias, in elements
    std::shared_ptr<Stack> m = lesson::partitioned<Stack>(comm, 6, 1, /*bias=*/true);
    zero::Config cfg = lesson::eager_release_config();
    cfg.stage3_prefetch_bucket_size = 1'000'000;
    cfg.stage3_max_live_parameters = 2 * layer;
    const int64_t planned = zero::plan_memory(*m, 2, cfg).gathered_peak;
    zero::Engine engine(m, comm, cfg, {});
    const int64_t peak = second_step_gathered_peak(comm, engine);
    EXPECT_EQ(peak, (2 * layer + layer) * 4)
        << "the bound, and the flat buffer of the layer being copied out";
    EXPECT_EQ(planned, (2 * layer + 2 * layer) * 4);
    EXPECT_LE(peak, planned);
  });
}

TEST(Lesson18LiveAndReuse, MaxLiveParametersAlsoBoundsWhatReuseKeeps) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    const int64_t weight_bytes = kWidth * kWidth * 4;
    std::vector<int64_t> peaks;
    for (int64_t max_live : {int64_t{1'000'000'000}, 2 * kWidth * kWidth}) {
      std::shared_ptr<Stack> m = lesson::partitioned<Stack>(comm, 6, 1);
      zero::Config cfg;  // the default reuse distance, 1e9 elements: everything comes back
      cfg.stage3_param_persistence_threshold = 0;
      cfg.stage3_prefetch_bucket_size = 0;
      cfg.stage3_max_live_parameters = max_live;
      zero::Engine engine(m, comm, cfg, {});
      peaks.push_back(second_step_gathered_peak(comm, engine));
    }
    EXPECT_EQ(peaks[0], 6 * weight_bytes) << "unbounded: all 6 kept at the turn";
    EXPECT_LE(peaks[1], 3 * weight_bytes) << "the bound (two weights) plus the one fetched";
  });
}

TEST(Lesson18LiveAndReuse, PositiveReuseDistanceKeepsARepeatedLayer) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::vector<int64_t> gathers;
    std::vector<std::vector<double>> outputs;
    for (int64_t reuse : {int64_t{0}, int64_t{1}}) {
      manual_seed(9);
      std::shared_ptr<Stack> m;
      {
        zero::Init init(comm);
        m = std::make_shared<Stack>(2, 2);  // l0, l0, l1, l1
      }
      zero::Config cfg = lesson::eager_release_config();
      cfg.stage3_max_reuse_distance = reuse;
      zero::Engine engine(m, comm, cfg, {});
      Tensor x = ones({2, kWidth});
      engine.backward(sum(engine(x)));  // records the trace
      engine.step();
      int64_t before = engine.stats().gathers_issued;
      engine.set_event_log(true);
      Tensor y = engine(x);
      outputs.push_back(y.to_vector());
      engine.backward(sum(y));
      engine.step();
      gathers.push_back(engine.stats().gathers_issued - before);
      const auto& ev = engine.events();
      const size_t first = lesson::index_of(ev, "fetch:l0");
      const size_t second = lesson::index_of(ev, "fetch:l0", first + 1);
      ASSERT_NE(second, std::string::npos);
      const bool released_between = lesson::index_of(ev, "release:l0", first) < second;
      // With reuse distance 1, l0 comes back after 0 elements, fewer than 1: it is kept.
      EXPECT_EQ(released_between, reuse == 0) << "reuse distance " << reuse;
    }
    // The step fetches l0 l0 l1 l1 (forward) then l1 l1 l0 l0 (backward). Released every
    // time, that is 8 all-gathers. Kept while the next fetch is the same layer, l0 is
    // gathered twice (once per pass) and l1 once: its backward follows its forward.
    EXPECT_EQ(gathers[0], 8);
    EXPECT_EQ(gathers[1], 3);
    EXPECT_EQ(outputs[0], outputs[1]) << "the same computation";
  });
}
