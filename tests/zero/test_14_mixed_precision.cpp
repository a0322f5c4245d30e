// Lesson 14 — mixed precision, on the CPU.
// Invariant: with bf16 (or fp16) enabled, parameters are stored, gathered and computed in
// 16 bits while the optimizer updates fp32 master shards from fp32 gradient shards; the
// 16-bit shard is the master rounded. With fp16 the loss is scaled; a step whose
// gradients overflow is skipped (parameters untouched), says so, and lowers the scale.
//
// The cost: zt keeps fp32 gradient shards and reduces in fp32, so model state is
// 2 (bf16 shard) + 4 (gradient) + 4 (master) + 8 (Adam) = 18 bytes per shard element,
// MORE than fp32's 16 (lesson 10), and 2 more than the paper's mixed-precision 2 + 2 + 12
// (fp16 gradients; DeepSpeed also reduces in the parameters' dtype by default). What halves is the
// gathered parameters and their all-gathers: a step moves (N - 1) x shard x (2 + 2 + 4) bytes
// instead of lesson 9's 3 x 4.
#include <cmath>
#include <vector>

#include "optim/schedule.h"
#include "zero/checkpoint_util.h"
#include "zero/lesson_util.h"
#include "zero/memory_plan.h"

using namespace zt;

namespace {
class Mlp : public nn::UnaryModule {
 public:
  Mlp() : nn::UnaryModule("Mlp") {
    a = register_module("a", std::make_shared<nn::Linear>(8, 16));
    b = register_module("b", std::make_shared<nn::Linear>(16, 4));
  }
  std::shared_ptr<nn::Linear> a, b;

 protected:
  Tensor forward(const Tensor& x) override { return (*b)(gelu((*a)(x))); }
};

// The Mlp as every test here builds it: seed 4, partitioned over comm's ranks.
std::shared_ptr<Mlp> partitioned_mlp(comm::Communicator& comm) {
  manual_seed(4);
  return lesson::partitioned<Mlp>(comm);
}

// Every "<param>.step" of the engine's optimizer: each parameter's own update count.
std::vector<double> param_steps(zero::Engine& engine) {
  std::vector<double> steps;
  for (const auto& [name, t] : engine.optimizer().state_dict())
    if (name.ends_with(".step")) steps.push_back(t.item());
  return steps;
}

std::pair<Tensor, Tensor> data(int step) {
  Generator g(50 + static_cast<uint64_t>(step % 4));
  Tensor x = randn({16, 8}, g);
  return {x, mul(x.narrow(1, 0, 4), 0.5)};  // a learnable linear target
}
}  // namespace

TEST(Lesson14MixedPrecision, Bf16ParamsWithFp32Masters) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Mlp> m = partitioned_mlp(comm);
    zero::Config cfg;
    cfg.precision.bf16 = true;
    zero::OptimizerConfig opt;
    opt.lr = 1e-2;
    zero::Engine engine(m, comm, cfg, opt);
    EXPECT_EQ(m->a->weight.dtype(), DType::bf16);
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      auto [x, y] = data(step);
      Tensor loss = mse_loss(engine(x.to(DType::bf16)).to(DType::f32), y);
      if (step == 0) first = loss.item();
      last = loss.item();
      engine.backward(loss);
      engine.step();
    }
    EXPECT_LT(last, 0.5 * first) << "bf16 training converges";
    for (const auto& mp : engine.partitioned()) {
      zero::ZeroParam* z = zero::zero_param(mp.param);
      EXPECT_EQ(z->master.dtype(), DType::f32);
      EXPECT_EQ(z->shard.dtype(), DType::bf16);
      EXPECT_CLOSE(z->shard.to(DType::f32), z->master.to(DType::bf16).to(DType::f32), 0, 0)
          << mp.name << ": the bf16 shard is the rounded master";
    }
  });
}

TEST(Lesson14MixedPrecision, Bf16CostsEighteenBytesPerElement) {
  const int N = 2;
  comm::run_threads(N, [](comm::Communicator& comm) {
    std::shared_ptr<Mlp> m = partitioned_mlp(comm);
    zero::Config cfg = lesson::eager_release_config();
    cfg.precision.bf16 = true;
    zero::Engine engine(m, comm, cfg, {});
    int64_t shard = 0, grad_slots = 0;  // elements
    for (const auto& mp : engine.partitioned()) {
      shard += zero::zero_param(mp.param)->part.shard_numel;
      grad_slots += zero::grad_shard_slot(zero::zero_param(mp.param)->part.shard_numel);
    }
    auto [x, y] = data(0);
    comm.reset_counters();
    engine.backward(mse_loss(engine(x.to(DType::bf16)).to(DType::f32), y));
    engine.step();  // creates Adam's moments
    const zero::MemoryReport r = engine.memory_report();
    EXPECT_EQ(r.param_shard, 2 * shard) << "bf16 parameter shards";
    EXPECT_EQ(r.grad_shard, 4 * grad_slots) << "fp32 gradient shards (16-element slots)";
    EXPECT_EQ(r.optim_state, (4 + 8) * shard) << "fp32 masters and Adam's two fp32 moments";
    const comm::CommCounters c = comm.counters();
    EXPECT_EQ(c[comm::Collective::kAllGather].bytes, 2 * (N - 1) * shard * 2)
        << "forward and backward gathers, in bf16";
    EXPECT_EQ(c[comm::Collective::kReduceScatter].bytes, (N - 1) * shard * 4)
        << "gradients are reduced in fp32";
  });
}

// Loading fp32 weights into a bf16 engine: the masters take them exactly, the bf16
// shards rounded (a bf16 staging copy would have rounded the masters too).
TEST(Lesson14MixedPrecision, LoadedWeightsReachTheMastersUnrounded) {
  manual_seed(6);
  Mlp plain;
  Generator g(7);
  std::vector<std::pair<std::string, Tensor>> state;
  for (const auto& [name, p] : plain.named_parameters())
    state.emplace_back(name, randn(p.sizes(), g) * 0.3);  // not bf16 values
  comm::run_threads(2, [&](comm::Communicator& comm) {
    std::shared_ptr<Mlp> m = partitioned_mlp(comm);
    zero::Config cfg;
    cfg.precision.bf16 = true;
    zero::Engine engine(m, comm, cfg, zero::OptimizerConfig{});
    zero::load_state_dict(*m, comm.rank() == 0 ? state : decltype(state){}, comm);
    int compared = 0;
    for (const auto& mp : engine.partitioned()) {
      const zero::ZeroParam* z = zero::zero_param(mp.param);
      const Tensor want = [&] {
        for (const auto& [name, t] : state)
          if (name == mp.name) return t.reshape({-1});
        return Tensor();
      }();
      if (z->part.shard_valid(comm.rank()) == 0) continue;
      EXPECT_TRUE(lesson::shard_is_slice(z->master, z->part, comm.rank(), want)) << mp.name;
      EXPECT_TRUE(lesson::shard_is_slice(z->shard.to(DType::f32), z->part, comm.rank(),
                                         want.to(DType::bf16).to(DType::f32)))
          << mp.name;
      ++compared;
    }
    EXPECT_EQ(compared, 4) << "a and b, weight and bias, each with elements on every rank";
  });
}

// A bf16 checkpoint holds the fp32 masters beside the bf16 shards, and a load restores
// both: the masters are where the updates accumulate (most of them under half a bf16 ulp),
// so masters taken from the shards would lose them. An engine built with other values
// holds the saved engine's masters and shards bit for bit after the load.
TEST(Lesson14MixedPrecision, ACheckpointRestoresTheFp32Masters) {
  lesson::TempDir tmp;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    zero::Config cfg;
    cfg.precision.bf16 = true;
    zero::OptimizerConfig opt;
    opt.lr = 1e-2;
    zero::Engine saved(partitioned_mlp(comm), comm, cfg, opt);
    for (int step = 0; step < 3; ++step) {
      auto [x, y] = data(step);
      saved.backward(mse_loss(saved(x.to(DType::bf16)).to(DType::f32), y));
      saved.step();
    }
    zero::save_checkpoint(saved, tmp.path, "three");
    manual_seed(9);
    zero::Engine loaded(lesson::partitioned<Mlp>(comm), comm, cfg, opt);
    zero::load_checkpoint(loaded, tmp / "three");
    for (size_t i = 0; i < saved.partitioned().size(); ++i) {
      const zero::ZeroParam* want = zero::zero_param(saved.partitioned()[i].param);
      const zero::ZeroParam* got = zero::zero_param(loaded.partitioned()[i].param);
      EXPECT_EQ(got->master.to_vector(), want->master.to_vector()) << saved.partitioned()[i].name;
      EXPECT_EQ(got->shard.to_vector(), want->shard.to_vector()) << saved.partitioned()[i].name;
    }
  });
}

// A loss of 16-bit outputs is f32 (core/ops/loss.h): scaled by the default 2^16 it stays
// finite, so the first fp16 step is applied at the full scale. (A 16-bit loss times 65536
// is inf in f16, whatever the loss: every step at that scale would be skipped.)
TEST(Lesson14MixedPrecision, Fp16LossesOfSixteenBitOutputsTakeTheDefaultScale) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Mlp> m = partitioned_mlp(comm);
    zero::Config cfg;
    cfg.precision.fp16 = true;  // dynamic scaling from 2^16
    zero::Engine engine(m, comm, cfg, {});
    auto [x, y] = data(0);
    const Tensor logits = engine(x.to(DType::f16));
    ASSERT_EQ(logits.dtype(), DType::f16);
    const Tensor loss = cross_entropy(logits, argmax(y, 1));
    EXPECT_EQ(loss.dtype(), DType::f32);
    engine.backward(loss);
    EXPECT_TRUE(engine.step()) << "the first step overflowed at scale 2^16";
    EXPECT_EQ(engine.stats().overflow_skips, 0);
    EXPECT_EQ(engine.loss_scale(), 65536.0);
  });
}

TEST(Lesson14MixedPrecision, Fp16OverflowSkipsTheStep) {
  ::testing::internal::CaptureStderr();  // rank 0 says what each overflow did
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Mlp> m = partitioned_mlp(comm);
    zero::Config cfg;
    cfg.precision.fp16 = true;
    cfg.precision.initial_scale_power = 40;  // 2^40: fp16 gradients overflow at once
    cfg.precision.hysteresis = 1;            // halve at every overflow
    zero::Engine engine(m, comm, cfg, {});
    auto before = lesson::full_parameters(*m, comm);
    auto [x, y] = data(0);
    engine.backward(mse_loss(engine(x.to(DType::f16)).to(DType::f32), y));
    EXPECT_FALSE(engine.step()) << "the overflowed update is skipped";
    EXPECT_EQ(engine.stats().overflow_skips, 1);
    EXPECT_EQ(engine.loss_scale(), std::ldexp(1.0, 39));
    auto after = lesson::full_parameters(*m, comm);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < before.size(); ++i)
      EXPECT_CLOSE(after[i].second, before[i].second, 0, 0) << before[i].first << " untouched";
    // Nor is it an optimizer step: the optimizer's count and each parameter's own (Adam's
    // bias correction) hold, as DeepSpeed's do.
    EXPECT_EQ(engine.optimizer().step_count(), 0);
    for (double s : param_steps(engine)) EXPECT_EQ(s, 0.0);
    // The scale keeps halving until gradients fit, then training proceeds. A schedule read
    // from the optimizer's count (as the apps' is) holds its rate over the skipped steps:
    // the first update applied runs at the schedule's first rate, not at a later one.
    const auto schedule = optim::LrSchedule::step(0.01, 1, 0.5);  // 0.01, 0.005, 0.0025
    std::vector<double> applied_lrs;
    for (int step = 1; step < 40 && applied_lrs.size() < 3; ++step) {
      engine.set_lr(schedule.lr_at(engine.optimizer().step_count()));
      auto [xs, ys] = data(step);
      engine.backward(mse_loss(engine(xs.to(DType::f16)).to(DType::f32), ys));
      if (engine.step()) applied_lrs.push_back(engine.lr());
    }
    EXPECT_EQ(applied_lrs, (std::vector<double>{0.01, 0.005, 0.0025}));
    EXPECT_EQ(engine.optimizer().step_count(), 3);
    const std::vector<double> steps = param_steps(engine);
    EXPECT_EQ(steps, std::vector<double>(4, 3.0)) << "a.weight, a.bias, b.weight, b.bias";
    // Halved once per overflow; never doubled, as that takes loss_scale_window + 1 (1001 at
    // the default window) good steps in a row.
    EXPECT_GT(engine.stats().overflow_skips, 1);
    EXPECT_EQ(engine.loss_scale(),
              std::ldexp(1.0, 40 - static_cast<int>(engine.stats().overflow_skips)));
    EXPECT_TRUE(std::isfinite(engine.last_grad_norm()));
  });
  // Steps are counted as the caller makes them, skipped ones included. The scales are
  // 2^40 -> 2^39 as %g prints them.
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("overflow at step 1: update skipped, loss scale 1.09951e+12 -> 5.49756e+11"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("overflow at step 2: update skipped, loss scale 5.49756e+11 -> "),
            std::string::npos)
      << said;
}

// An overflow at the minimum scale stops the run. Before any update was applied it says
// more: the gradients overflowed at every scale tried, so lowering the learning rate or
// clipping (which acts after the check) cannot help; an operation overflows fp16, or the
// minimum is too high.
TEST(Lesson14MixedPrecision, NoUpdateBeforeTheMinimumScaleIsNamed) {
  EXPECT_TRUE(test::throws_with(
      [] {
        comm::run_threads(2, [](comm::Communicator& comm) {
          std::shared_ptr<Mlp> m = partitioned_mlp(comm);
          zero::Config cfg;
          cfg.quiet = true;
          cfg.precision.fp16 = true;
          cfg.precision.initial_scale_power = 40;  // 2^40: fp16 gradients overflow at once
          cfg.precision.min_loss_scale = std::ldexp(1.0, 38);
          cfg.precision.hysteresis = 1;
          zero::Engine engine(m, comm, cfg, {});
          for (int step = 0; step < 3; ++step) {  // 2^40 -> 2^39 -> 2^38, then the error
            auto [x, y] = data(step);
            engine.backward(mse_loss(engine(x.to(DType::f16)).to(DType::f32), y));
            EXPECT_FALSE(engine.step());
          }
        });
      },
      "No update was applied since the engine was made: the gradients overflowed at every "
      "scale from the first down to the minimum"));
}

// A step verifies the replicas (buffers.verify_every) only when it applies its update. A
// skipped step leaves global_step() where it was, a multiple of verify_every as often as
// not (0 before the first update): the engine's count says whether a check ran.
TEST(Lesson14MixedPrecision, ASkippedFp16StepVerifiesNoReplicas) {
  ::testing::internal::CaptureStderr();  // the overflow notes
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Mlp> m = partitioned_mlp(comm);
    zero::Config cfg;
    cfg.precision.fp16 = true;
    cfg.precision.initial_scale_power = 40;  // 2^40: fp16 gradients overflow at once
    cfg.precision.hysteresis = 1;
    cfg.buffers.verify_every = 1;
    zero::Engine engine(m, comm, cfg, {});
    EXPECT_EQ(engine.stats().replica_verifications, 1) << "the construction's";
    int64_t applied = 0;
    for (int step = 0; step < 40 && applied < 2; ++step) {
      auto [x, y] = data(step);
      engine.backward(mse_loss(engine(x.to(DType::f16)).to(DType::f32), y));
      const int64_t before = engine.stats().replica_verifications;
      const bool ok = engine.step();
      EXPECT_EQ(engine.stats().replica_verifications, before + (ok ? 1 : 0))
          << "step " << step << (ok ? " applied" : " skipped");
      applied += ok ? 1 : 0;
    }
    EXPECT_EQ(applied, 2);
    EXPECT_GT(engine.stats().overflow_skips, 0);
    EXPECT_EQ(engine.stats().replica_verifications, 1 + applied);
    engine.verify_replicas();  // the caller's own count too
    EXPECT_EQ(engine.stats().replica_verifications, 2 + applied);
  });
  ::testing::internal::GetCapturedStderr();
}

// With hysteresis 2 the first overflow only uses it up; the note names the setting both as
// zero::Config's field and as DeepSpeed's key.
TEST(Lesson14MixedPrecision, Fp16HysteresisIsNamedWhenTheScaleIsKept) {
  ::testing::internal::CaptureStderr();
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Mlp> m = partitioned_mlp(comm);
    zero::Config cfg;
    cfg.precision.fp16 = true;
    cfg.precision.initial_scale_power = 40;  // 2^40: fp16 gradients overflow at once
    cfg.precision.hysteresis = 2;
    zero::Engine engine(m, comm, cfg, {});
    auto [x, y] = data(0);
    engine.backward(mse_loss(engine(x.to(DType::f16)).to(DType::f32), y));
    EXPECT_FALSE(engine.step());
    EXPECT_EQ(engine.loss_scale(), std::ldexp(1.0, 40));
  });
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("loss scale kept at 1.09951e+12 (precision.hysteresis, DeepSpeed's "
                      "fp16.hysteresis: the next overflow halves it)"),
            std::string::npos)
      << said;
}

TEST(Lesson14MixedPrecision, PartitionInTheStorageDtype) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    // An fp32 parameter partitioned straight into bf16 storage (what the engine does
    // to a model built without zero::Init): the fp32 values become the master shard.
    Tensor value = from_vector({0.1, 1.0 / 3, -2.7, 1e-3, 5.5}, {5});
    Tensor p = value.clone().set_requires_grad(true);
    zero::partition_param(p, comm, 0, DType::bf16);
    zero::ZeroParam* z = zero::zero_param(p);
    EXPECT_EQ(p.dtype(), DType::bf16) << "the tensor says how it is stored";
    EXPECT_EQ(z->shard.dtype(), DType::bf16);
    ASSERT_TRUE(z->master.defined());
    EXPECT_EQ(z->master.dtype(), DType::f32);
    EXPECT_TRUE(lesson::shard_is_slice(z->master, z->part, comm.rank(), value));
    EXPECT_CLOSE(z->shard.to(DType::f32), z->master.to(DType::bf16).to(DType::f32), 0, 0);
    z->gather(comm);
    z->wait();
    EXPECT_CLOSE(p.to(DType::f32), value.to(DType::bf16).to(DType::f32), 0, 0);
    z->release();
    // A frozen parameter keeps no master.
    Tensor frozen = value.clone();
    zero::partition_param(frozen, comm, 0, DType::bf16);
    EXPECT_FALSE(zero::zero_param(frozen)->master.defined());
  });
}

TEST(Lesson14MixedPrecision, AnEditOfAFewElementsKeepsTheOtherMasters) {
  // One rank too: there the gathered value may share the shard's storage.
  for (int ranks : {1, 2})
    comm::run_threads(ranks, [](comm::Communicator& comm) {
      // Values bf16 cannot hold: their masters keep bits the bf16 shard has lost.
      const Tensor value = from_vector({0.1, 1.0 / 3, -2.7, 1e-3, 5.5, 0.7}, {6});
      Tensor p = value.clone().set_requires_grad(true);
      zero::partition_param(p, comm, 0, DType::bf16);
      zero::ZeroParam* z = zero::zero_param(p);
      {
        // Rank 0 edits element 4 of the gathered bf16 value (as vqtok's dead-code restart
        // moves a few codes); the edit reaches every rank's shard and master.
        zero::GatheredParameters g({p}, comm, /*modifier_rank=*/0);
        autograd::NoGradGuard ng;
        if (comm.rank() == 0) p.select(0, 4).copy_(full({}, 2.0, DType::bf16));
      }
      Tensor want = value.clone();
      want.select(0, 4).copy_(full({}, 2.0));
      EXPECT_TRUE(lesson::shard_is_slice(z->master, z->part, comm.rank(), want))
          << "unedited elements keep their fp32 masters";
      EXPECT_TRUE(lesson::shard_is_slice(z->shard.to(DType::f32), z->part, comm.rank(),
                                         want.to(DType::bf16).to(DType::f32)));
    });
}

namespace {
// LoRA-style: a frozen bf16 base weight beside trainable f32 adapters, in one module.
class Adapted : public nn::UnaryModule {
 public:
  Adapted() : nn::UnaryModule("Adapted") {
    base = register_parameter("base", randn({8, 8}).to(DType::bf16), /*requires_grad=*/false);
    down = register_parameter("down", mul(randn({2, 8}), 0.1));
    up = register_parameter("up", mul(randn({8, 2}), 0.1));
  }
  Tensor base, down, up;

 protected:
  Tensor forward(const Tensor& x) override {
    return add(linear(x, base.to(DType::f32)), linear(linear(x, down), up));
  }
};
}  // namespace

// A module whose parameters are stored in different dtypes is gathered with one
// all-gather per dtype, and trains on two ranks as on one.
TEST(Lesson14MixedPrecision, AModuleMixingStorageDtypesIsGatheredOncePerDtype) {
  std::map<int, std::vector<double>> trained;
  for (int world : {1, 2}) {
    comm::run_threads(world, [&](comm::Communicator& comm) {
      manual_seed(9);
      auto m = lesson::partitioned<Adapted>(comm);
      zero::Config cfg = lesson::eager_release_config();
      zero::OptimizerConfig opt;
      opt.lr = 1e-2;
      zero::Engine engine(m, comm, cfg, opt);
      for (int step = 0; step < 3; ++step) {
        Generator g(70 + static_cast<uint64_t>(step));
        const Tensor x = randn({4, 8}, g);
        comm.reset_counters();
        engine.backward(
            mse_loss(engine(lesson::rank_slice(x, comm)), lesson::rank_slice(mul(x, 0.5), comm)));
        if (world == 2) {
          EXPECT_EQ(comm.counters()[comm::Collective::kAllGather].calls, 2 * 2)
              << "forward and backward, one all-gather for bf16 and one for f32";
        }
        engine.step();
      }
      std::vector<double> all;
      for (const auto& [name, t] : lesson::full_parameters(*m, comm)) {
        const std::vector<double> v = t.to(DType::f64).to_vector();
        all.insert(all.end(), v.begin(), v.end());
      }
      if (comm.rank() == 0) trained[world] = all;
    });
  }
  ASSERT_EQ(trained[1].size(), trained[2].size());
  for (size_t i = 0; i < trained[1].size(); ++i)
    EXPECT_NEAR(trained[2][i], trained[1][i], 1e-6) << i;
}

// A second engine over the same model takes its own precision, not the first one's: the
// parameters' own dtype (f32 here) decides, and the fp32 masters give the f32 shards back
// their values, not their bf16 rounding. Frozen under an f32 engine, a parameter keeps no
// master; the planner predicts from the same dtype the engine stores.
TEST(Lesson14MixedPrecision, ASecondEngineTakesItsOwnPrecision) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Mlp> m = partitioned_mlp(comm);
    auto [x, y] = data(0);
    zero::Config bf16;
    bf16.precision.bf16 = true;
    std::vector<double> masters;
    {
      zero::Engine first(m, comm, bf16, {});
      first.backward(mse_loss(first(x.to(DType::bf16)).to(DType::f32), y));
      first.step();
      masters = zero::zero_param(m->a->weight)->master.to_vector();
      EXPECT_EQ(zero::plan_memory(*m, 2, zero::Config{}).param_shard,
                zero::plan_memory(*m, 2, bf16).param_shard * 2)
          << "the plan for f32 counts 4 bytes an element, bf16 2, whatever is stored now";
    }
    {
      zero::Engine f32(m, comm, zero::Config{}, {});
      EXPECT_EQ(m->a->weight.dtype(), DType::f32);
      const zero::ZeroParam* z = zero::zero_param(m->a->weight);
      EXPECT_EQ(z->shard.dtype(), DType::f32);
      EXPECT_EQ(z->shard.to_vector(), masters) << "the masters' values, not their rounding";
      EXPECT_FALSE(z->master.defined()) << "an f32 shard is its own master";
      f32.backward(mse_loss(f32(x), y));
      f32.step();
    }
    m->a->requires_grad_(false);
    zero::Engine frozen(m, comm, zero::Config{}, {});
    EXPECT_FALSE(zero::zero_param(m->a->weight)->master.defined());
    frozen.backward(mse_loss(frozen(x), y));
    frozen.step();
  });
}

// From one 16-bit precision to another (bf16, then fp16): the new shards are rounded from
// the fp32 masters, as every step rounds them, not from the old shards. fp16 holds 3 more
// mantissa bits than bf16: shards converted from bf16 would keep bf16's rounding until the
// first update.
TEST(Lesson14MixedPrecision, ASecondSixteenBitEngineRoundsItsShardsFromTheMasters) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<Mlp> m = partitioned_mlp(comm);
    auto [x, y] = data(0);
    zero::Config bf16;
    bf16.precision.bf16 = true;
    {
      zero::Engine first(m, comm, bf16, {});
      first.backward(mse_loss(first(x.to(DType::bf16)).to(DType::f32), y));
      first.step();
    }
    zero::Config fp16;
    fp16.precision.fp16 = true;
    zero::Engine second(m, comm, fp16, {});
    for (const auto& mp : second.partitioned()) {
      const zero::ZeroParam* z = zero::zero_param(mp.param);
      ASSERT_EQ(z->shard.dtype(), DType::f16) << mp.name;
      EXPECT_EQ(z->shard.to_vector(), z->master.to(DType::f16).to_vector()) << mp.name;
    }
  });
}
