// Lesson 25 — when a step fails.
// Invariant: a training step that fails part way leaves the engine ready for the next
// call, so that catching the error and running the step again trains exactly as if it had
// never failed. A step fails when a rank's memory limit refuses an allocation (in the
// forward, the backward, or the optimizer's first step) or a backward function raises:
//  - forward: the module's error hook releases what its pre-forward hook gathered and
//    abandons the step's trace; a gather whose full copies could not be allocated keeps
//    what the collective brought, and the next wait finishes it without another one;
//  - backward: the accumulation window is discarded (queued and in-flight buckets, the
//    gradient shards), and the end-of-backward release is armed again;
//  - step: the optimizer's counters and first-step moments go back (the fp16 loss scaler
//    counts a step only once the optimizer applied it), the window is
//    discarded (Engine::discard_gradients() does the same on request);
//  - a GatheredParameters scope that could not gather opens nothing and holds nothing;
//  - an engine destroyed after a failed forward drops the gathers it left in flight.
// A failed forward is retried only where every rank failed alike: the retry's first
// collective is an agreement that a rank which failed alone cannot meet.
// With more than one rank a failed backward or step also aborts the communicator: the
// ranks' collectives can no longer be matched, so the others stop with the cause rather
// than pairing the wrong collectives.
// The user has one duty: a failure in the user's own code between the engine's forward
// and backward (the loss, say) is outside the engine's reach. The step's trace then holds
// a forward that the retry will repeat: call Engine::discard_gradients() before retrying.
//
// Run alone: ctest --test-dir build -R zero.Lesson25
#include <array>
#include <cmath>
#include <utility>

#include "zero/checkpoint_util.h"

using namespace zt;

namespace {

constexpr int64_t kWidth = 16, kDepth = 3, kBatch = 4;

// The batch of step s: x, y (kBatch, kWidth).
std::pair<Tensor, Tensor> batch_of(int s) {
  Generator g(200 + s);
  Tensor x = randn({kBatch, kWidth}, g);
  return {x, randn({kBatch, kWidth}, g)};
}

std::shared_ptr<lesson::TanhStack> stack(comm::Communicator& comm) {
  manual_seed(5);
  return lesson::partitioned<lesson::TanhStack>(comm, kDepth, kWidth);
}

// Where a step failed: the engine's forward, the user's loss, the engine's backward or
// step.
enum Phase { kForward, kLoss, kBackward, kStep, kPhases };

// One training step on batch s (its input in `dt`); with `limit` > 0 under that many more
// bytes than this rank holds now. Returns the phase that ran out of memory, or kPhases
// when none did.
Phase step_under(zero::Engine& engine, int s, int64_t limit, DType dt = DType::f32) {
  auto [x, y] = batch_of(s);
  MemoryLedger& ledger = *current_ledger();
  ledger.set_limit(Device::cpu(), limit > 0 ? memory_stats().total_current + limit : 0);
  Phase at = kForward;
  try {
    Tensor out = engine(x.to(dt));
    at = kLoss;
    Tensor loss = mse_loss(out.to(DType::f32), y);
    at = kBackward;
    engine.backward(loss);
    at = kStep;
    engine.step();
    at = kPhases;
  } catch (const OutOfMemoryError&) {
    // The user's duty: the loss failed outside the engine's reach. Every failure inside
    // the engine, the engine undoes by itself.
    if (at == kLoss) engine.discard_gradients();
  }
  ledger.set_limit(Device::cpu(), 0);
  return at;
}

}  // namespace

TEST(Lesson25Failures, AStepThatRanOutOfMemoryAnywhereTrainsAsIfItNeverFailed) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    // The reference: three steps, each at its first try.
    auto ref = stack(comm);
    zero::Engine plain(ref, comm, lesson::eager_release_config(), {});
    reset_peak_memory();
    const int64_t before = memory_stats().total_current;
    step_under(plain, 0, 0);
    const int64_t need = memory_stats().total_peak - before;  // the first step's, moments too
    for (int s = 1; s < 3; ++s) step_under(plain, s, 0);
    const auto want = lesson::full_parameters(*ref, comm);

    // The first step of a fresh engine under budgets from nothing to all it needs: it fails
    // at every point of the step in turn, is run again without the limit, and two more
    // steps follow. Every run must end where the reference did, bit for bit.
    std::array<int, kPhases> failed{};
    constexpr int kBudgets = 40;
    for (int b = 0; b <= kBudgets; ++b) {
      auto m = stack(comm);
      zero::Engine engine(m, comm, lesson::eager_release_config(), {});
      const Phase at = step_under(engine, 0, 1 + need * b / kBudgets);
      if (at != kPhases) {
        ++failed[at];
        ASSERT_EQ(step_under(engine, 0, 0), kPhases) << "budget " << b << ", again unlimited";
      }
      for (int s = 1; s < 3; ++s) ASSERT_EQ(step_under(engine, s, 0), kPhases);
      EXPECT_EQ(engine.stats().steps, 3);
      // A retry whose forward the trace still held would record a forward twice, and the
      // next step would find its order changed.
      EXPECT_EQ(engine.stats().trace_invalidations, 0) << "after a failure at phase " << at;
      const auto got = lesson::full_parameters(*m, comm);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[i].second.to_vector(), want[i].second.to_vector())
            << got[i].first << " after a failure at phase " << at << " (budget " << b << ")";
    }
    EXPECT_GT(failed[kForward], 0);
    EXPECT_GT(failed[kLoss], 0);
    EXPECT_GT(failed[kBackward], 0);
    EXPECT_GT(failed[kStep], 0) << "the optimizer's first step: its moments";
  });
}

// Under fp16 a step that failed in the optimizer leaves the loss scaler as it was: with
// loss_scale_window 1 the scale doubles at every applied step after the first (as
// DeepSpeed's), so it doubles at the step after the retry, not at the retry itself.
TEST(Lesson25Failures, AFailedFp16StepLeavesTheLossScaleAsItWas) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    zero::Config cfg = lesson::eager_release_config();
    cfg.precision.fp16 = true;
    cfg.precision.initial_scale_power = 8;
    cfg.precision.loss_scale_window = 1;
    bool failed_in_step = false;
    for (int64_t limit = 1; !failed_in_step && limit < (int64_t{1} << 24); limit *= 2) {
      auto m = stack(comm);
      zero::Engine engine(m, comm, cfg, {});
      failed_in_step = step_under(engine, 0, limit, DType::f16) == kStep;
      if (!failed_in_step) continue;
      EXPECT_EQ(engine.loss_scale(), 256.0) << "the failed step moved the scale";
      ASSERT_EQ(step_under(engine, 0, 0, DType::f16), kPhases);
      EXPECT_EQ(engine.loss_scale(), 256.0) << "the failed step counted as a good one";
      ASSERT_EQ(step_under(engine, 1, 0, DType::f16), kPhases);
      EXPECT_EQ(engine.loss_scale(), 512.0);
      EXPECT_EQ(engine.stats().steps, 2);
    }
    EXPECT_TRUE(failed_in_step) << "no budget failed in the optimizer's first step";
  });
}

TEST(Lesson25Failures, AGatherThatRanOutOfMemoryIsFinishedByTheNextCall) {
  // Two ranks, so each layer's weight and bias arrive in one collective and are then
  // copied out into full tensors: a limit can refuse those copies after the collective.
  // The forward is tried under growing budgets; every failure is followed by the same
  // forward without the limit, which must give the reference output, and training goes
  // on to match the run that never failed.
  std::vector<std::vector<double>> outputs(2), reference(2);
  for (bool limited : {false, true}) {
    comm::run_threads(2, [&](comm::Communicator& comm) {
      auto m = stack(comm);
      zero::Engine engine(m, comm, lesson::eager_release_config(), {});
      auto& out = limited ? outputs[comm.rank()] : reference[comm.rank()];
      int failures = 0, finished_by_the_retry = 0;
      for (int s = 0; s < 12; ++s) {
        auto [x, y] = batch_of(s);
        current_ledger()->set_limit(Device::cpu(), memory_stats().total_current + 256 * s + 1);
        Tensor pred;
        try {
          if (limited) pred = engine(x);
        } catch (const OutOfMemoryError&) {
          ++failures;
        }
        current_ledger()->set_limit(Device::cpu(), 0);
        if (!pred.defined()) {
          // Layers whose all-gather came back but could not be copied out are still in
          // flight: the retry finishes them with no collective of its own, and gathers
          // every other layer (eager release) once.
          int kept = 0;
          for (const auto& l : m->layers)
            kept += zero::zero_param(l->weight)->status == zero::ParamStatus::kInflight;
          finished_by_the_retry += kept;
          comm.reset_counters();
          pred = engine(x);
          EXPECT_EQ(comm.counters()[comm::Collective::kAllGather].calls, kDepth - kept)
              << "step " << s << ": one all-gather per layer not already in flight";
        }
        const std::vector<double> v = pred.to_vector();
        out.insert(out.end(), v.begin(), v.end());
        engine.backward(mse_loss(pred, y));
        engine.step();
      }
      if (limited) {
        EXPECT_GT(failures, 2);
        EXPECT_GT(finished_by_the_retry, 0) << "no failure left a gather in flight";
      }
    });
  }
  EXPECT_EQ(outputs, reference);
}

TEST(Lesson25Failures, AnEngineGoneWithGathersInFlightLeavesNoneBehind) {
  // A forward that fails after its first layer prefetched the others leaves their gathers
  // in flight (the next fetch would finish them). The engine going away then waits for
  // them and drops what they brought: no work outlives it, and a new engine trains on.
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = stack(comm);
    zero::Config cfg = lesson::eager_release_config();
    cfg.stage3_prefetch_bucket_size = 1'000'000;
    auto in_flight = [&] {
      int n = 0;
      for (auto& [name, p] : m->named_parameters())
        n += zero::zero_param(p)->status == zero::ParamStatus::kInflight;
      return n;
    };
    auto [x, y] = batch_of(0);
    {
      zero::Engine engine(m, comm, cfg, {});
      engine.backward(mse_loss(engine(x), y));  // records the order prefetching follows
      engine.step();
      const int hook = m->layers[0]->add_forward_pre_hook(
          [](nn::Module&, std::vector<Tensor>&) { throw Error("the first layer failed"); });
      EXPECT_THROW(engine(x), Error);
      m->layers[0]->remove_hook(hook);
      ASSERT_GT(in_flight(), 0) << "no prefetch was left in flight: nothing to test";
    }
    EXPECT_EQ(in_flight(), 0);
    zero::Engine again(m, comm, cfg, {});
    for (int s = 1; s < 3; ++s) {
      auto [xs, ys] = batch_of(s);
      const Tensor loss = mse_loss(again(xs), ys);
      EXPECT_TRUE(std::isfinite(loss.item()));
      again.backward(loss);
      again.step();
    }
  });
}

TEST(Lesson25Failures, AFailedBackwardIsDiscardedAndTheReleaseAfterBackwardStillRuns) {
  comm::run_threads(1, [](comm::Communicator& comm) {
    auto ref = stack(comm), m = stack(comm);
    zero::Engine plain(ref, comm, lesson::eager_release_config(), {});
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    // A backward function that raises once, after the last layer's gradients are queued.
    bool fail = true;
    const Tensor w0 = m->layers[0]->weight;
    const int hook = w0.register_post_accumulate_grad_hook([&](const Tensor&) {
      if (std::exchange(fail, false)) throw Error("a backward function failed");
    });
    auto [x, y] = batch_of(0);
    EXPECT_THROW(engine.backward(mse_loss(engine(x), y)), Error);
    w0.remove_post_accumulate_grad_hook(hook);
    // step() now is refused (nothing to apply), and changes nothing.
    EXPECT_TRUE(test::throws_with([&] { engine.step(); }, "no backward() since the last step()"));
    for (int s = 0; s < 3; ++s) {
      auto [xs, ys] = batch_of(s);
      engine.backward(mse_loss(engine(xs), ys));
      // Released when backward ends: the first layer too (its input needs no gradient).
      for (auto& [n, p] : m->named_parameters()) EXPECT_FALSE(p.has_storage()) << n;
      engine.step();
      plain.backward(mse_loss(plain(xs), ys));
      plain.step();
    }
    const auto want = lesson::full_parameters(*ref, comm);
    const auto got = lesson::full_parameters(*m, comm);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(got[i].second.to_vector(), want[i].second.to_vector()) << got[i].first;
  });
}

TEST(Lesson25Failures, DiscardGradientsDropsTheWindowAndARefusedStepCanBeRetried) {
  const lesson::TempDir dir;  // one for both ranks
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto ref = stack(comm), m = stack(comm);
    zero::Config gas = lesson::eager_release_config();
    gas.gradient_accumulation_steps = 2;
    zero::Engine plain(ref, comm, gas, {});
    zero::Engine engine(m, comm, gas, {});
    auto train = [](zero::Engine& e, int s) {
      auto [x, y] = batch_of(s);
      e.backward(mse_loss(e(x), y));
    };
    // Two backwards without a step between: refused, and refused again (the count stays)
    // until discard_gradients() drops the window.
    train(engine, 7);
    train(engine, 8);
    EXPECT_TRUE(test::throws_with([&] { engine.step(); }, "discard_gradients()"));
    EXPECT_THROW(engine.step(), Error);
    engine.discard_gradients();
    // Half a window, dropped: the next window is the reference's first.
    train(engine, 9);
    engine.step();
    engine.discard_gradients();
    for (int s = 0; s < 4; ++s) {
      train(engine, s);
      engine.step();
      train(plain, s);
      plain.step();
    }
    EXPECT_EQ(engine.stats().steps, plain.stats().steps);
    // The dropped half window does not shift the boundaries: a checkpoint saves here.
    EXPECT_TRUE(engine.at_window_start());
    const std::string saved = zero::save_checkpoint(engine, dir.path, "after_discard");
    // A load in the middle of a window drops the window's gradients (computed from the
    // weights being replaced) and starts a new one.
    train(engine, 5);
    EXPECT_FALSE(engine.at_window_start());
    zero::load_checkpoint(engine, saved);
    EXPECT_TRUE(engine.at_window_start());
    const auto want = lesson::full_parameters(*ref, comm);
    const auto got = lesson::full_parameters(*m, comm);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(got[i].second.to_vector(), want[i].second.to_vector()) << got[i].first;
  });
}

TEST(Lesson25Failures, ABackwardThatFailsOnOneRankStopsTheOthersWithItsCause) {
  std::vector<std::string> seen(2);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto m = stack(comm);
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    const Tensor w = m->layers[kDepth - 1]->weight;
    if (comm.rank() == 1)
      w.register_post_accumulate_grad_hook(
          [](const Tensor&) { throw Error("rank 1's backward function failed"); });
    try {
      for (int s = 0; s < 3; ++s) {
        auto [x, y] = batch_of(s);
        engine.backward(mse_loss(engine(x), y));
        engine.step();
      }
    } catch (const std::exception& e) {
      seen[comm.rank()] = e.what();
    }
    // Carrying on after the error: the communicator is aborted, on both ranks.
    EXPECT_THROW(comm.barrier(), comm::AbortedError);
  });
  EXPECT_NE(seen[1].find("rank 1's backward function failed"), std::string::npos) << seen[1];
  EXPECT_NE(seen[0].find("rank 1: the engine's backward failed: rank 1's backward function"),
            std::string::npos)
      << seen[0];
}

// A forward that fails is retried where every rank failed alike (a memory limit all of
// them hit): the retry's first collective is an agreement they all meet. A forward that
// fails on one rank only (its own bad sample) cannot be retried there: that rank's
// agreement meets the other rank's next collective, which both report as a mismatch
// naming it, instead of pairing the retried all-gathers with the other rank's later ones.
TEST(Lesson25Failures, AForwardThatFailedOnOneRankOnlyIsNotRetriedIntoTheOthersCollectives) {
  std::vector<std::string> seen(2);
  comm::run_threads(2, [&](comm::Communicator& comm) {
    auto m = stack(comm);
    zero::Engine engine(m, comm, lesson::eager_release_config(), {});
    bool fail = comm.rank() == 1;
    m->layers[1]->add_forward_pre_hook([&](nn::Module&, std::vector<Tensor>&) {
      if (std::exchange(fail, false)) throw Error("rank 1's sample is bad");
    });
    auto [x, y] = batch_of(0);
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        engine.backward(mse_loss(engine(x), y));
        engine.step();
        break;
      } catch (const std::exception& e) {
        seen[comm.rank()] = e.what();
        if (seen[comm.rank()].find("sample is bad") == std::string::npos) break;
      }
    }
  });
  for (const std::string& s : seen)
    EXPECT_NE(s.find("[the agreement after a failed forward]"), std::string::npos) << s;
}

TEST(Lesson25Failures, AGatheredParametersScopeThatCouldNotGatherHoldsNothing) {
  comm::run_threads(2, [](comm::Communicator& comm) {
    auto m = stack(comm);
    // Too little memory for the scope's gather: it opens nothing and keeps nothing held.
    current_ledger()->set_limit(Device::cpu(), memory_stats().total_current + 1024);
    EXPECT_THROW(zero::GatheredParameters whole(*m, comm), OutOfMemoryError);
    current_ledger()->set_limit(Device::cpu(), 0);
    for (auto& [n, p] : m->named_parameters()) {
      EXPECT_EQ(zero::zero_param(p)->holds, 0) << n;
      EXPECT_FALSE(p.has_storage()) << n;
    }
    {
      zero::GatheredParameters whole(*m, comm);
      for (auto& [n, p] : m->named_parameters()) EXPECT_TRUE(p.has_storage()) << n;
    }
    for (auto& [n, p] : m->named_parameters()) EXPECT_FALSE(p.has_storage()) << n;
  });
}
