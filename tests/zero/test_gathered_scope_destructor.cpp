// A GatheredParameters scope closed by its destructor never throws: a scope held in a
// std::optional or a std::unique_ptr is closed by a destructor the standard library calls
// from a noexcept context, where a throw ends the process. An exit that fails there (an edit
// refused in a read-only scope, a broadcast on a broken communicator) is not lost: the next
// scope, engine forward or engine step on the rank's thread raises it with its own message
// (once), and a rank that ends first prints it. exit() throws it at once.
#include <optional>
#include <type_traits>

#include "zero/lesson_util.h"

using namespace zt;
using lesson::Pair;

static_assert(std::is_nothrow_destructible_v<zero::GatheredParameters>,
              "a scope held in std::optional or std::unique_ptr would end the process");

namespace {

void edit(const Tensor& p) {
  autograd::NoGradGuard no_grad;
  p.fill_(5.0);
}

Tensor loss_of(zero::Engine& e, int seed) {
  manual_seed(static_cast<uint64_t>(seed));
  return mean(mul(e(randn({3, 4})), e(randn({3, 4}))));
}

}  // namespace

// An edit refused by a read-only scope that a unique_ptr or an optional closes: the model is
// as it was, and the next scope opened on the thread is refused with the exit's message; the
// one after it opens.
TEST(GatheredScopeDestructor, ARefusedEditInAnOwnedScopeReachesTheNextScope) {
  for (int N : {1, 2}) {
    for (bool optional : {false, true}) {
      SCOPED_TRACE(std::to_string(N) + " ranks, " + (optional ? "optional" : "unique_ptr"));
      comm::run_threads(N, [&](comm::Communicator& comm) {
        auto m = lesson::partitioned<Pair>(comm);
        const auto before = lesson::full_parameters(*m, comm);
        if (optional) {
          std::optional<zero::GatheredParameters> g;
          g.emplace(*m, comm);
          edit(m->b->bias);
          g.reset();
        } else {
          auto g = std::make_unique<zero::GatheredParameters>(*m, comm);
          edit(m->b->bias);
          g.reset();
        }
        EXPECT_TRUE(test::throws_with([&] { zero::GatheredParameters next(*m, comm); },
                                      "'b.bias' was modified inside a scope without "
                                      "modifier_rank"));
        const auto after = lesson::full_parameters(*m, comm);  // raised once: this one opens
        for (size_t i = 0; i < before.size(); ++i)
          EXPECT_EQ(after[i].second.to_vector(), before[i].second.to_vector()) << after[i].first;
      });
    }
  }
}

// The same failure under an engine: its next step is refused with the exit's message and
// changes nothing (the window is kept), and the step after it goes on.
TEST(GatheredScopeDestructor, ARefusedEditInAnOwnedScopeReachesTheNextStep) {
  for (int N : {1, 2}) {
    SCOPED_TRACE(std::to_string(N) + " ranks");
    comm::run_threads(N, [&](comm::Communicator& comm) {
      auto m = lesson::partitioned<Pair>(comm);
      zero::Engine e(m, comm, lesson::eager_release_config(), {});
      e.backward(loss_of(e, 1));
      auto g = std::make_unique<zero::GatheredParameters>(*m, comm);
      edit(m->a->weight);
      g.reset();
      EXPECT_TRUE(test::throws_with([&] { e.step(); }, "'a.weight' was modified inside a scope"));
      EXPECT_EQ(e.global_step(), 0);
      EXPECT_TRUE(e.step());
    });
  }
}

// A modifier scope whose broadcast fails (the communicator broke inside it), closed by its
// unique_ptr: no termination, what it gathered is released, and the next scope names the
// failure.
TEST(GatheredScopeDestructor, AFailedBroadcastInAnOwnedScopeReachesTheNextScope) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto m = lesson::partitioned<Pair>(comm);
    auto g = std::make_unique<zero::GatheredParameters>(*m, comm, /*modifier_rank=*/0);
    comm.abort("the communicator broke inside the scope");
    g.reset();
    EXPECT_EQ(zero::zero_param(m->a->weight)->holds, 0);
    EXPECT_EQ(zero::zero_param(m->a->weight)->status, zero::ParamStatus::kNotAvailable);
    EXPECT_TRUE(test::throws_with([&] { zero::GatheredParameters next(*m, comm); },
                                  "broke inside the scope"));
  });
}

// A failure that nothing raised before its rank ended is printed, not dropped.
TEST(GatheredScopeDestructor, AFailureNotRaisedBeforeTheRankEndsIsPrinted) {
  testing::internal::CaptureStderr();
  comm::run_threads(1, [&](comm::Communicator& comm) {
    auto m = lesson::partitioned<Pair>(comm);
    auto g = std::make_unique<zero::GatheredParameters>(*m, comm);
    edit(m->a->bias);
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("'a.bias' was modified inside a scope"), std::string::npos) << err;
}

// apply_gathered closes each module's scope itself: a broadcast that fails there (the
// communicator broke in the last module's init) comes out of apply_gathered, not later.
TEST(GatheredScopeDestructor, ApplyGatheredThrowsTheFailureOfItsLastScope) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto m = lesson::partitioned<Pair>(comm);
    EXPECT_TRUE(test::throws_with(
        [&] {
          zero::apply_gathered(*m, comm, [&](const std::string& name, nn::Module&) {
            if (name == "b") comm.abort("the communicator broke in b's init");
          });
        },
        "broke in b's init"));
  });
}
