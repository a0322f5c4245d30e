// GatheredParameters scopes held across an engine's step or construction. A read-only
// scope's values are whole copies of the shards: an edit made in it reaches no shard, and
// its exit says so. The step re-gathers every copy a scope holds from the updated shards
// (and an fp16 step skipped for an overflow keeps them), so an edit made before a step would
// otherwise be replaced by the update at one rank count and kept at another with no error
// either way: the step (and an engine's construction) refuses an edit of a parameter,
// naming it, before it changes anything; a replica's too, which the step would update and
// keep (buffers, which a training forward writes, it does not check). A modifier scope's
// edits reach the shards before the copies are gathered again: at a step, when an engine is
// built over the model, and before a checkpoint reads them. A load writes shards and copies
// alike: no edit.
#include <string>

#include "nn/state_dict.h"
#include "zero/checkpoint.h"
#include "zero/checkpoint_util.h"

using namespace zt;
using lesson::Pair;

namespace {

// Linear(4, 4) -> BatchNorm1d(4): a training forward writes the running statistics.
struct Normed : nn::UnaryModule {
  Normed() : nn::UnaryModule("Normed") {
    lin = register_module("lin", std::make_shared<nn::Linear>(4, 4));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
  }
  Tensor forward(const Tensor& x) override { return (*bn)((*lin)(x)); }
  std::shared_ptr<nn::Linear> lin;
  std::shared_ptr<nn::BatchNorm1d> bn;
};

// Pair with `a` a trainable zero::Replicated replica: the step updates it in place.
struct HalfReplicated : nn::UnaryModule {
  explicit HalfReplicated(comm::Communicator& comm) : nn::UnaryModule("HalfReplicated") {
    {
      zero::Replicated whole(comm);
      a = register_module("a", std::make_shared<nn::Linear>(4, 4));
    }
    b = register_module("b", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override { return (*b)(tanh((*a)(x))); }
  std::shared_ptr<nn::Linear> a, b;
};

Tensor loss_of(zero::Engine& e, int seed) {
  manual_seed(static_cast<uint64_t>(seed));
  return mean(mul(e(randn({3, 4})), e(randn({3, 4}))));
}

}  // namespace

// An edit in a read-only scope before the step: the step is refused (nothing updated, the
// window kept), and once the scope is closed (its exit names the edit) the step goes on.
TEST(GatheredScopeEdges, AnEditInAReadOnlyScopeBeforeAStepIsRefusedByTheStep) {
  for (int N : {1, 2}) {
    for (bool persistent : {true, false}) {
      SCOPED_TRACE(std::to_string(N) + " ranks, persistent " + std::to_string(persistent));
      comm::run_threads(N, [&](comm::Communicator& comm) {
        auto m = lesson::partitioned<Pair>(comm);
        zero::Engine e(m, comm, persistent ? zero::Config{} : lesson::eager_release_config(), {});
        const auto before = lesson::full_parameters(*m, comm);
        zero::GatheredParameters g(*m, comm);
        e.backward(loss_of(e, 1));
        {
          autograd::NoGradGuard no_grad;
          m->b->bias.fill_(5.0);
        }
        EXPECT_TRUE(test::throws_with([&] { e.step(); }, "'b.bias' was modified inside a scope"));
        EXPECT_EQ(e.global_step(), 0);
        EXPECT_TRUE(test::throws_with([&] { g.exit(); }, "'b.bias' was modified inside a scope"));
        // Nothing was updated, and the edit the exit refused is gone.
        const auto after = lesson::full_parameters(*m, comm);
        for (size_t i = 0; i < before.size(); ++i)
          EXPECT_EQ(after[i].second.to_vector(), before[i].second.to_vector()) << after[i].first;
        EXPECT_TRUE(e.step());  // the window was kept
      });
    }
  }
}

// A replica's edit in a read-only scope before a step: the step updates the replica from the
// edited value and takes the result as the scope's, so the exit would find nothing to refuse
// and the edit would stay. The step refuses it, as it does a partitioned parameter's.
TEST(GatheredScopeEdges, AReplicasEditInAReadOnlyScopeBeforeAStepIsRefusedByTheStep) {
  for (int N : {1, 2}) {
    SCOPED_TRACE(std::to_string(N) + " ranks");
    comm::run_threads(N, [&](comm::Communicator& comm) {
      zero::Init init(comm);
      auto m = std::make_shared<HalfReplicated>(comm);
      ASSERT_TRUE(zero::is_replicated(m->a->bias));
      zero::Engine e(m, comm, {}, {});
      const std::vector<double> before = m->a->bias.to_vector();
      zero::GatheredParameters g(*m, comm);
      e.backward(loss_of(e, 1));
      {
        autograd::NoGradGuard no_grad;
        m->a->bias.fill_(7.0);
      }
      EXPECT_TRUE(test::throws_with([&] { e.step(); }, "'a.bias' was modified inside a scope"));
      EXPECT_TRUE(test::throws_with([&] { g.exit(); }, "'a.bias' was modified inside a scope"));
      EXPECT_EQ(m->a->bias.to_vector(), before);
      EXPECT_TRUE(e.step());
    });
  }
}

// An edit in a read-only scope, refused by its exit, leaves the model as it was before the
// scope at every rank count: at one rank too, where a gathered parameter is its shard
// itself, with or without an engine, whose persistent parameters stay gathered past the
// scope; a buffer (never gathered) too.
TEST(GatheredScopeEdges, AnEditInAReadOnlyScopeLeavesTheModelAsItWas) {
  for (int N : {1, 2}) {
    for (const char* engine : {"none", "persistent", "eager"}) {
      comm::run_threads(N, [&](comm::Communicator& comm) {
        auto m = lesson::partitioned<Normed>(comm);
        std::unique_ptr<zero::Engine> e;
        if (std::string(engine) != "none")
          e = std::make_unique<zero::Engine>(
              m, comm,
              std::string(engine) == "persistent" ? zero::Config{} : lesson::eager_release_config(),
              zero::OptimizerConfig{});
        const auto before = lesson::full_parameters(*m, comm);
        {
          zero::GatheredParameters g(*m, comm);
          {
            autograd::NoGradGuard no_grad;
            m->lin->bias.fill_(5.0);
            m->bn->running_mean.fill_(5.0);
          }
          EXPECT_TRUE(
              test::throws_with([&] { g.exit(); }, "'lin.bias' was modified inside a scope"));
        }
        EXPECT_TRUE(test::values_are(m->bn->running_mean, std::vector<double>(4, 0.0)));
        const auto after = lesson::full_parameters(*m, comm);
        for (size_t i = 0; i < before.size(); ++i)
          EXPECT_EQ(after[i].second.to_vector(), before[i].second.to_vector())
              << after[i].first << " at " << N << " ranks, engine " << engine;
      });
    }
  }
}

// A modifier scope nested in a read-only one puts its edit on every rank's shard: the
// outer scope's exit takes it as no edit of its own (it said the change "would be lost",
// which it was not), and every rank keeps it, in mixed precision its fp32 master too.
TEST(GatheredScopeEdges, AModifierScopesEditInsideAReadOnlyScopeIsKept) {
  for (int N : {1, 2}) {
    for (bool bf16 : {false, true}) {
      comm::run_threads(N, [&](comm::Communicator& comm) {
        auto m = lesson::partitioned<Pair>(comm);
        zero::Config cfg;
        cfg.precision.bf16 = bf16;
        zero::Engine e(m, comm, cfg, {});
        {
          zero::GatheredParameters outer(*m, comm);
          {
            zero::GatheredParameters inner({m->b->bias}, comm, /*modifier_rank=*/0);
            if (comm.rank() == 0) {
              autograd::NoGradGuard no_grad;
              m->b->bias.fill_(0.5);
            }
          }
          EXPECT_NO_THROW(outer.exit()) << N << " ranks, bf16 " << bf16;
        }
        e.refresh_from_master();  // the shards again from the masters, where kept apart
        for (const auto& [name, t] : lesson::full_parameters(*m, comm))
          if (name == "b.bias") {
            EXPECT_TRUE(test::values_are(t.to(DType::f32), std::vector<double>(4, 0.5)))
                << N << " ranks, bf16 " << bf16;
          }
      });
    }
  }
}

// A modifier scope open while an engine is built over its model: the engine re-gathers
// every copy a scope holds from the shards, so rank 0's edits made so far reach the shards
// first (as at a step), and the scope's exit keeps them.
TEST(GatheredScopeEdges, AModifierScopeOpenWhileAnEngineIsBuiltKeepsItsEdits) {
  for (bool persistent : {true, false}) {
    SCOPED_TRACE("persistent " + std::to_string(persistent));
    comm::run_threads(2, [&](comm::Communicator& comm) {
      auto m = lesson::partitioned<Pair>(comm);
      {
        zero::GatheredParameters g(*m, comm, /*modifier_rank=*/0);
        if (comm.rank() == 0) {
          autograd::NoGradGuard no_grad;
          m->b->bias.fill_(7.0);
        }
        zero::Engine e(m, comm, persistent ? zero::Config{} : lesson::eager_release_config(), {});
      }
      for (const auto& [name, t] : lesson::full_parameters(*m, comm))
        if (name == "b.bias") {
          EXPECT_TRUE(test::values_are(t, std::vector<double>(4, 7.0)));
        }
    });
  }
}

// A read-only scope's edit of a partitioned parameter, open while an engine is built over its
// model: the engine gathers the scope's copies again from the shards, which would replace the
// edit at more than one rank with no error from the exit. The construction is refused, naming
// it, as a step is; the scope's exit still refuses the edit.
TEST(GatheredScopeEdges, AnEditInAReadOnlyScopeOpenWhileAnEngineIsBuiltIsRefused) {
  for (int N : {1, 2}) {
    SCOPED_TRACE(std::to_string(N) + " ranks");
    comm::run_threads(N, [&](comm::Communicator& comm) {
      auto m = lesson::partitioned<Pair>(comm);
      zero::GatheredParameters g(*m, comm);
      {
        autograd::NoGradGuard no_grad;
        m->a->weight.fill_(5.0);
      }
      EXPECT_TRUE(test::throws_with([&] { zero::Engine e(m, comm, {}, {}); },
                                    "'a.weight' was modified inside a scope without "
                                    "modifier_rank; the change would be lost when this engine"));
      EXPECT_TRUE(test::throws_with([&] { g.exit(); }, "'a.weight' was modified inside a scope"));
      EXPECT_NO_THROW(zero::Engine e(m, comm, {}, {}));
    });
  }
}

// A checkpoint saved, or a model exported, while a modifier scope is open holds the edits
// made so far, as a step taken then updates them: the shards it reads take them first. The
// model goes on with the edit, so a resume from a checkpoint without it would not.
TEST(GatheredScopeEdges, ACheckpointSavedInAModifierScopeHoldsItsEdits) {
  lesson::TempDir tmp;
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto m = lesson::partitioned<Pair>(comm);
    zero::Engine e(m, comm, {}, {});
    NamedTensors exported;
    {
      zero::GatheredParameters g(*m, comm, /*modifier_rank=*/0);
      if (comm.rank() == 0) {
        autograd::NoGradGuard no_grad;
        m->a->bias.fill_(3.0);
      }
      zero::save_checkpoint(e, tmp.path, "edited");
      exported = zero::consolidated_state(e);
    }
    for (const auto& [name, t] : exported)
      if (name == "a.bias") {
        EXPECT_EQ(t.to_vector(), std::vector<double>(4, 3.0)) << "exported";
      }
    auto fresh = lesson::partitioned<Pair>(comm);
    zero::Engine resumed(fresh, comm, {}, {});
    zero::load_checkpoint(resumed, tmp / "edited");
    for (const auto& [name, t] : lesson::full_parameters(*fresh, comm))
      if (name == "a.bias") {
        EXPECT_EQ(t.to_vector(), std::vector<double>(4, 3.0)) << "saved";
      }
  });
}

// A checkpoint saved while a read-only scope holds an edit of a parameter would hold the
// edit at one rank (the gathered parameter is the shard) and not at two, while the model, once
// the scope's exit puts the values back, holds it at neither: the save is refused on every
// rank, naming it. The same for a consolidated export.
TEST(GatheredScopeEdges, ASaveOrExportWithAnEditInAReadOnlyScopeIsRefused) {
  lesson::TempDir tmp;
  for (const bool save : {true, false}) {
    for (int N : {1, 2}) {
      SCOPED_TRACE(std::string(save ? "save, " : "export, ") + std::to_string(N) + " ranks");
      comm::run_threads(N, [&](comm::Communicator& comm) {
        auto m = lesson::partitioned<Pair>(comm);
        zero::Engine e(m, comm, {}, {});
        zero::GatheredParameters g(*m, comm);
        if (comm.rank() == 0) {
          autograd::NoGradGuard no_grad;
          m->a->weight.fill_(5.0);
        }
        EXPECT_TRUE(test::throws_with(
            [&] {
              if (save)
                zero::save_checkpoint(e, tmp.path, "edited");
              else
                zero::consolidated_state(e);
            },
            "'a.weight' was modified inside a scope"));
        EXPECT_FALSE(zero::has_checkpoint(tmp.path));
        if (comm.rank() == 0) {
          EXPECT_TRUE(test::throws_with([&] { g.exit(); }, "'a.weight' was modified"));
        }
      });
    }
  }
}

// What a step re-gathers is the partitioned parameters' copies: the running statistics a
// training forward writes inside a read-only scope (a buffer it covers) are no edit the
// step refuses; the step's sync takes them as the scope's values, as it does the update.
TEST(GatheredScopeEdges, AForwardsBufferWritesInAReadOnlyScopeDoNotStopTheStep) {
  for (int N : {1, 2}) {
    comm::run_threads(N, [&](comm::Communicator& comm) {
      auto m = lesson::partitioned<Normed>(comm);
      zero::Engine e(m, comm, {}, {});
      zero::GatheredParameters g(*m, comm);
      e.backward(loss_of(e, 1));
      EXPECT_TRUE(e.step());
      EXPECT_NO_THROW(g.exit());
    });
  }
}

// A load is no edit: zero::load_state_dict and load_checkpoint write the shards and the
// copies a read-only scope holds alike, so its exit keeps quiet (it said the loaded values
// "would be lost on exit", which they were not).
TEST(GatheredScopeEdges, ALoadInsideAReadOnlyScopeIsNoEdit) {
  lesson::TempDir tmp;
  for (int N : {1, 2}) {
    const std::string tag = "saved_at_" + std::to_string(N);
    comm::run_threads(N, [&](comm::Communicator& comm) {
      auto m = lesson::partitioned<Normed>(comm);
      zero::Engine e(m, comm, {}, {});
      zero::save_checkpoint(e, tmp.path, tag);
      auto lin_bias = [&] {
        for (const auto& [name, t] : lesson::full_parameters(*m, comm))
          if (name == "lin.bias") return t.to_vector();
        return std::vector<double>{};
      };
      const std::vector<double> saved = lin_bias();
      {
        zero::GatheredParameters g(*m, comm);
        nn::NamedTensors dict;
        for (const auto& [name, t] : nn::state_dict(*m))
          dict.emplace_back(name, name == "lin.bias" ? full({4}, 2.0) : t.detach().clone());
        zero::load_state_dict(*m, dict, comm);
        EXPECT_NO_THROW(g.exit());
      }
      EXPECT_EQ(lin_bias(), std::vector<double>(4, 2.0)) << N << " ranks";
      {
        zero::GatheredParameters g(*m, comm);
        zero::load_checkpoint(e, tmp / tag);
        EXPECT_NO_THROW(g.exit());
      }
      EXPECT_EQ(lin_bias(), saved) << N << " ranks";
    });
  }
}
