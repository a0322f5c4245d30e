// Frozen parameters under bf16 and fp16. The optimizer never updates a frozen parameter,
// so an engine built with one keeps no fp32 master for it (partition_param: "the fp32
// master shard if the parameter requires grad"): its 16-bit shard is the rounding of its
// fp32 values, and it costs 2 bytes per element. In a freezing schedule, where a layer an
// earlier engine trained is frozen for the next engine, the master that engine left stays:
// the 16-bit shard is its rounding, and a later phase that unfreezes the layer trains on
// from the full-precision values rather than from their rounding.
#include <map>
#include <memory>
#include <string>

#include "zero/lesson_util.h"

using namespace zt;

namespace {

zero::Config with_precision(DType low) {
  zero::Config cfg = lesson::eager_release_config();
  cfg.precision.bf16 = low == DType::bf16;
  cfg.precision.fp16 = low == DType::f16;
  return cfg;
}

std::map<std::string, Tensor> by_name(const std::vector<std::pair<std::string, Tensor>>& all) {
  return {all.begin(), all.end()};
}

void train(zero::Engine& e, comm::Communicator& comm, DType low, int steps) {
  for (int s = 0; s < steps; ++s) {
    manual_seed(static_cast<uint64_t>(10 + s));
    const Tensor x = lesson::rank_slice(randn({4, 8}), comm).to(low);
    e.backward(mean(e(x).to(DType::f32)));
    EXPECT_TRUE(e.step());
  }
}

}  // namespace

TEST(FrozenPrecision, AFrozenParameterKeepsNoMasterAndIsItsValuesRounded) {
  for (DType low : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(low));
    comm::run_threads(2, [&](comm::Communicator& comm) {
      manual_seed(3);
      auto m = lesson::partitioned<lesson::TanhStack>(comm, 2, 8);
      const auto before = by_name(lesson::full_parameters(*m, comm));  // f32
      m->layers[1]->requires_grad_(false);
      zero::Engine e(m, comm, with_precision(low), lesson::adamw());
      for (const char* name : {"l1.weight", "l1.bias"}) {
        const zero::ZeroParam* z =
            zero::zero_param(name[3] == 'w' ? m->layers[1]->weight : m->layers[1]->bias);
        EXPECT_FALSE(z->master.defined()) << name << ": frozen, so no master";
        EXPECT_EQ(z->shard.dtype(), low) << name;
        EXPECT_TRUE(lesson::shard_is_slice(z->shard.to(DType::f32), z->part, comm.rank(),
                                           before.at(name).to(low).to(DType::f32)))
            << name << ": the 16-bit shard is the fp32 value rounded";
      }
      const zero::ZeroParam* t = zero::zero_param(m->layers[0]->weight);
      ASSERT_TRUE(t->master.defined()) << "a trainable parameter keeps its master";
      EXPECT_TRUE(lesson::shard_is_slice(t->master, t->part, comm.rank(), before.at("l0.weight")));
      const Tensor frozen_shard = zero::zero_param(m->layers[1]->weight)->shard.clone();
      train(e, comm, low, 2);
      EXPECT_TRUE(
          test::all_close(zero::zero_param(m->layers[1]->weight)->shard, frozen_shard, 0, 0))
          << "the optimizer leaves a frozen parameter alone";
      int64_t trainable = 0;  // shard elements of l0
      for (const Tensor& p : {m->layers[0]->weight, m->layers[0]->bias})
        trainable += zero::zero_param(p)->part.shard_numel;
      EXPECT_EQ(e.memory_report().optim_state, (4 + 8) * trainable)
          << "masters and Adam's moments for l0 only";
    });
  }
}

TEST(FrozenPrecision, AMasterAnEarlierEngineLeftIsKeptWhileFrozen) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    manual_seed(3);
    auto m = lesson::partitioned<lesson::TanhStack>(comm, 2, 8);
    zero::ZeroParam* z = zero::zero_param(m->layers[1]->weight);
    Tensor trained;  // l1's master after the first phase: off the bf16 grid
    {
      zero::Engine first(m, comm, with_precision(DType::bf16), lesson::adamw());
      train(first, comm, DType::bf16, 3);
      trained = z->master.clone();
      EXPECT_FALSE(test::all_close(trained, trained.to(DType::bf16).to(DType::f32), 0, 0))
          << "the updates left bits bf16 cannot hold";
    }
    m->layers[1]->requires_grad_(false);
    {
      zero::Engine frozen(m, comm, with_precision(DType::bf16), lesson::adamw());
      ASSERT_TRUE(z->master.defined()) << "the master the first engine left stays";
      EXPECT_TRUE(test::all_close(z->master, trained, 0, 0));
      EXPECT_TRUE(
          test::all_close(z->shard.to(DType::f32), z->master.to(DType::bf16).to(DType::f32), 0, 0))
          << "the bf16 shard is the master rounded";
      train(frozen, comm, DType::bf16, 2);
      EXPECT_TRUE(test::all_close(z->master, trained, 0, 0)) << "frozen: not updated";
    }
    m->layers[1]->requires_grad_(true);
    zero::Engine next(m, comm, with_precision(DType::bf16), lesson::adamw());
    EXPECT_TRUE(test::all_close(z->master, trained, 0, 0))
        << "the next phase trains on from the full-precision values";
  });
}
