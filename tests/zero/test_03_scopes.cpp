// Lesson 3 — explicit, nestable scopes.
// Invariant: a scope decides only for what is registered while it is open, the innermost
// scope wins, and nothing leaks out: Init > Replicated > Init gives partitioned, then
// replicated, then partitioned modules; outside every scope parameters are plain; a weight
// tied across two scopes is refused, not changed to the second one's kind. And
// after the fact, zero::partition / zero::replicate convert a built module; either way
// every rank ends up with rank 0's values, of the parameters and of the buffers.
#include "zero/lesson_util.h"

using namespace zt;

TEST(Lesson03Scopes, InnermostScopeWins) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<nn::Linear> a, b, c, d, e;
    {
      zero::Init outer(comm);
      a = std::make_shared<nn::Linear>(4, 4);
      {
        zero::Replicated frozen(comm);
        b = std::make_shared<nn::Linear>(4, 4);
        {
          zero::Init inner(comm);
          c = std::make_shared<nn::Linear>(4, 4);
        }
      }
      e = std::make_shared<nn::Linear>(4, 4);  // Replicated closed: `outer` decides again
    }
    d = std::make_shared<nn::Linear>(4, 4);
    EXPECT_TRUE(zero::is_partitioned(a->weight));
    EXPECT_TRUE(zero::is_replicated(b->weight));
    EXPECT_TRUE(zero::is_partitioned(c->weight));
    EXPECT_TRUE(zero::is_partitioned(e->weight)) << "closing a scope hands back to the outer one";
    EXPECT_EQ(zero::zero_param(d->weight), nullptr) << "no scope: a plain parameter";
    EXPECT_TRUE(d->weight.has_storage());
  });
}

namespace {
// A module that registers a weight made elsewhere, as an output head tied to a token table.
class Borrows : public nn::UnaryModule {
 public:
  explicit Borrows(const Tensor& w) : nn::UnaryModule("Borrows") {
    register_parameter("weight", w);
  }

 protected:
  Tensor forward(const Tensor& x) override { return x; }
};
}  // namespace

// A weight tied across scopes keeps the kind its first scope gave it: registering it under
// the other scope is an error naming it, not a silent change of a partitioned table into
// a replica held whole on every rank (or of a Replicated module's weight into a
// partitioned one, gathered at every call of the module meant to run as a plain replica).
TEST(Lesson03Scopes, AWeightTiedAcrossScopesIsRefused) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    zero::Init init(comm);
    auto table = std::make_shared<nn::Linear>(4, 4);
    std::shared_ptr<nn::Linear> frozen;
    {
      zero::Replicated replicas(comm);
      frozen = std::make_shared<nn::Linear>(4, 4);
      EXPECT_TRUE(test::throws_with([&] { Borrows head(table->weight); },
                                    "zero::Replicated: parameter 'weight' is partitioned"));
    }
    EXPECT_TRUE(test::throws_with([&] { Borrows head(frozen->weight); },
                                  "zero::Init: parameter 'weight' is a zero::Replicated"));
    EXPECT_TRUE(zero::is_partitioned(table->weight));
    EXPECT_TRUE(zero::is_replicated(frozen->weight));
  });
}

TEST(Lesson03Scopes, ConvertAfterTheFact) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    manual_seed(comm.rank());  // ranks differ: rank 0's values must win
    auto m = std::make_shared<lesson::TokenizerLike>();
    std::vector<std::string> rank0;  // each parameter's hash on rank 0 before partitioning
    int differ = 0;
    for (auto& [n, p] : m->named_parameters()) {
      auto h = lesson::hashes_across_ranks(p, comm);
      differ += h[0] != h[1] && h[0] != h[2] ? 1 : 0;
      rank0.push_back(h[0]);
    }
    ASSERT_EQ(differ, 2) << "the conv's random weight and bias differ; the norms start at 1 and 0";
    zero::partition(*m, comm);
    for (auto& [n, p] : m->named_parameters()) EXPECT_TRUE(zero::is_partitioned(p)) << n;
    zero::replicate(*m, comm);
    size_t i = 0;
    for (auto& [n, p] : m->named_parameters()) {
      EXPECT_TRUE(zero::is_replicated(p)) << n;
      auto h = lesson::hashes_across_ranks(p, comm);
      for (auto& x : h) EXPECT_EQ(x, rank0[i]) << n << ": rank 0's value on every rank";
      ++i;
    }
  });
}

// zero::replicate on a plain module built differently on each rank (a loader that ran on
// rank 0 only, say) broadcasts rank 0's parameters and buffers: nothing was partitioned
// first, so no gather has already made the ranks agree.
TEST(Lesson03Scopes, ReplicateBroadcastsRank0sParametersAndBuffers) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    manual_seed(comm.rank());  // the conv's weight and bias differ across ranks
    auto m = std::make_shared<lesson::TokenizerLike>();
    std::vector<std::pair<std::string, Tensor>> tensors = m->named_parameters();
    const size_t num_params = tensors.size();  // the parameters, then the buffers
    for (auto& nb : m->named_buffers()) tensors.push_back(nb);
    {
      // The norms' parameters and every buffer (BatchNorm's statistics and step count)
      // start equal on every rank: made to differ by hand.
      autograd::NoGradGuard ng;
      for (auto& [n, t] : tensors)
        if (n.rfind("conv.", 0) != 0) t.fill_(1 + comm.rank());
    }
    std::vector<std::string> rank0;  // each tensor's hash on rank 0 before replicate
    for (auto& [n, t] : tensors) {
      auto h = lesson::hashes_across_ranks(t, comm);
      ASSERT_TRUE(h[0] != h[1] && h[0] != h[2]) << n << " must start different on every rank";
      rank0.push_back(h[0]);
    }
    zero::replicate(*m, comm);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& [n, t] = tensors[i];
      if (i < num_params) {
        EXPECT_TRUE(zero::is_replicated(t)) << n;
      }
      for (auto& x : lesson::hashes_across_ranks(t, comm))
        EXPECT_EQ(x, rank0[i]) << n << ": rank 0's value on every rank";
    }
  });
}
