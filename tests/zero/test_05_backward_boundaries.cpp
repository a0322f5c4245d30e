// Lesson 5 — backward boundaries.
// Invariant: a module's parameters are gathered again before its backward runs and
// released after it. The engine wraps each module's outputs in an identity autograd
// function whose backward fires first (pre-backward: gather) and its inputs in one whose
// backward fires last (post-backward: release). Modules whose inputs need no gradient
// (the first layer) are released when backward ends.
//
// The engine's event log (Engine::set_event_log, used from here on) names what happens,
// module by module: "fetch:m" (forward needs m's parameters, which may be gathered
// already), "gather:m" (an all-gather was issued for it on demand), "prefetch:m" (issued
// ahead of need, lesson 7), "forward_end:m", "fetch_backward:m" (its backward needs them),
// "release:m" (logged even when nothing was releasable, e.g. persistent parameters).
#include <algorithm>

#include "zero/lesson_util.h"

using namespace zt;

static size_t index_of(const std::vector<std::string>& ev, const std::string& e, size_t from = 0) {
  auto it = std::find(ev.begin() + static_cast<int64_t>(from), ev.end(), e);
  return it == ev.end() ? std::string::npos : static_cast<size_t>(it - ev.begin());
}

TEST(Lesson05BackwardBoundaries, RegatheredForBackwardReleasedAfter) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m;
    {
      zero::Init init(comm);
      m = std::make_shared<lesson::Mixed>();
    }
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    engine.set_event_log(true);
    auto [x, y] = lesson::batch(2, comm.rank());
    Tensor loss = mse_loss(engine(x), y);
    size_t fwd_end = engine.events().size();
    for (auto& [n, p] : m->named_parameters())
      EXPECT_FALSE(p.has_storage()) << n << " released after forward";
    engine.backward(loss);
    const auto& ev = engine.events();
    // Backward visits modules in reverse: head first, conv3 last.
    size_t head = index_of(ev, "fetch_backward:head", fwd_end);
    size_t conv2 = index_of(ev, "fetch_backward:conv2", fwd_end);
    ASSERT_NE(head, std::string::npos);
    ASSERT_NE(conv2, std::string::npos);
    EXPECT_LT(head, conv2);
    // The head is released (post-backward) before conv2 is gathered for its backward.
    size_t head_release = index_of(ev, "release:head", head);
    EXPECT_LT(head_release, conv2);
    // conv3, the first layer, is gathered for backward last.
    size_t conv3 = index_of(ev, "fetch_backward:conv3", fwd_end);
    ASSERT_NE(conv3, std::string::npos);
    EXPECT_GT(conv3, conv2);
    // Everything is released once backward is over, conv3 included. Its input (the batch)
    // needs no gradient, so no post-backward hook released it: the end-of-backward sweep
    // did (it logs no event).
    for (auto& [n, p] : m->named_parameters())
      EXPECT_FALSE(p.has_storage()) << n << " released after backward";
    EXPECT_EQ(index_of(ev, "release:conv3", conv3), std::string::npos)
        << "no post-backward release: conv3's input needs no grad; the end-of-backward sweep "
           "freed it";
  });
}

TEST(Lesson05BackwardBoundaries, GradientsReachEveryShard) {
  comm::run_threads(3, [](comm::Communicator& comm) {
    std::shared_ptr<lesson::Mixed> m;
    {
      zero::Init init(comm);
      m = std::make_shared<lesson::Mixed>();
    }
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    auto [x, y] = lesson::batch(2, comm.rank());
    engine.backward(mse_loss(engine(x), y));
    engine.reduce_gradients();
    for (const auto& mp : engine.partitioned()) {
      EXPECT_FALSE(mp.param.grad().defined()) << mp.name << ": full gradient freed";
      int64_t valid = zero::zero_param(mp.param)->part.shard_valid(comm.rank());
      if (valid == 0) continue;
      EXPECT_GT(sum(abs(zero::zero_param(mp.param)->grad_shard)).item(), 0.0)
          << mp.name << " received a gradient";
    }
  });
}
