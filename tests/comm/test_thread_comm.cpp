// ThreadComm: every collective for N = 1..4 on uneven sizes and several dtypes, async
// progress, fail-fast on exceptions, deadlines and mismatch detection, determinism, and
// byte counters that equal the textbook volumes.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "comm/checks.h"
#include "common/test_util.h"
#include "core/ops.h"
#include "zero/comm/launch.h"
#include "zero/comm/thread_comm.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;

namespace {
// Runs fn on n ranks; returns the error message run_threads rethrew ("" if none).
std::string run_error(int n, const std::function<void(Communicator&)>& fn) {
  try {
    run_threads(n, fn);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

class ThreadCommN : public ::testing::TestWithParam<int> {};

TEST_P(ThreadCommN, EveryCollective) {
  EXPECT_EQ(run_error(GetParam(), [](Communicator& c) { checks::every_collective(c); }), "");
}

TEST_P(ThreadCommN, EveryCollectiveAtTheEdges) {
  EXPECT_EQ(
      run_error(GetParam(), [](Communicator& c) { checks::every_collective_at_the_edges(c); }), "");
}

TEST_P(ThreadCommN, CountersMatchTextbookVolumes) {
  EXPECT_EQ(run_error(GetParam(), [](Communicator& c) { checks::counters_match_textbook(c); }), "");
}

TEST_P(ThreadCommN, AsyncCompletesWhileCallerComputes) {
  EXPECT_EQ(
      run_error(GetParam(), [](Communicator& c) { checks::async_completes_while_computing(c); }),
      "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadCommN, ::testing::Values(1, 2, 3, 4));

TEST(ThreadComm, RanksShareTheCallersThreadsAndOwnTheirLedgers) {
  const int n = 2;
  for (int caller : {0, 1, 4, 5}) {  // 0: the default count
    test::ThreadCount count(caller == 0 ? num_threads() : caller);
    const int share = std::max(1, num_threads() / n);
    std::atomic<int> bad{0};
    run_threads(n, [&](Communicator& c) {
      if (num_threads() != share) ++bad;
      // Both ranks allocate 4000 bytes between two barriers: this rank's ledger sees its
      // own tensor and not the other's (a ledger they shared would count 8000).
      const int64_t before = memory_stats().total_current;
      c.barrier();
      Tensor t = zeros({1000}, DType::f32);
      c.barrier();
      const int64_t grew = memory_stats().total_current - before;
      if (grew < 4000 || grew >= 8000) ++bad;
      c.barrier();  // the other rank's tensor lives until both have looked
    });
    EXPECT_EQ(bad.load(), 0) << "caller's threads " << caller;
  }
}

TEST(ThreadComm, AsyncWorkCompletesInIssueOrder) {
  run_threads(3, [](Communicator& c) {
    std::vector<Tensor> ts;
    std::vector<std::shared_ptr<Work>> ws;
    for (int k = 0; k < 8; ++k) {
      ts.push_back(full({257}, c.rank() + k, DType::f32));
      ws.push_back(c.all_reduce(ts.back(), ReduceOp::kSum, true));
    }
    ws.back()->wait();
    for (int k = 0; k < 8; ++k) {
      ZT_CHECK(ws[k]->test(), "work ", k, " not done after a later one");
      checks::expect_values(ts[k], std::vector<double>(257, 0 + 1 + 2 + 3.0 * k), "ordered");
    }
  });
}

TEST(ThreadComm, SumsAreBitwiseDeterministic) {
  // Rank order 0..N-1, whatever the timing: equal on every rank and to a serial sum.
  const int n = 4, numel = 4099;
  std::vector<std::vector<float>> inputs(n), results(n);
  for (int r = 0; r < n; ++r) {
    Generator g(42 + r);
    inputs[r] = [&] {
      Tensor t = randn({numel}, g);
      return std::vector<float>(t.data<float>(), t.data<float>() + numel);
    }();
  }
  for (int rep = 0; rep < 3; ++rep) {
    run_threads(n, [&](Communicator& c) {
      Tensor t = from_vector(std::vector<double>(inputs[c.rank()].begin(), inputs[c.rank()].end()),
                             {numel});
      if (c.rank() == rep % n) std::this_thread::sleep_for(2ms);  // vary arrival order
      c.all_reduce(t, ReduceOp::kSum);
      results[c.rank()].assign(t.data<float>(), t.data<float>() + numel);
    });
    for (int i = 0; i < numel; ++i) {
      float serial = inputs[0][i];
      for (int r = 1; r < n; ++r) serial += inputs[r][i];
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(std::memcmp(&results[r][i], &serial, 4), 0) << "rank " << r << " elem " << i;
    }
  }
}

TEST(ThreadComm, ExceptionOnOneRankReachesCallerAndOthersFailFast) {
  std::string rank0_error;
  auto t0 = std::chrono::steady_clock::now();
  std::string err = run_error(3, [&](Communicator& c) {
    c.set_timeout(20s);  // failing fast must not rely on the deadline
    if (c.rank() == 1) throw std::runtime_error("boom on rank one");
    Tensor t = ones({8});
    try {
      c.all_reduce(t, ReduceOp::kSum);
    } catch (const std::exception& e) {
      if (c.rank() == 0) rank0_error = e.what();
      throw;
    }
  });
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(err, "boom on rank one");
  EXPECT_NE(rank0_error.find("all_reduce #0"), std::string::npos) << rank0_error;
  EXPECT_NE(rank0_error.find("aborted because rank 1 failed: boom on rank one"), std::string::npos)
      << rank0_error;
}

TEST(ThreadComm, TimeoutNamesCollectiveSequenceAndMissingRanks) {
  std::string err = run_error(3, [](Communicator& c) {
    c.set_timeout(200ms);
    c.barrier();  // #0: everyone
    if (c.rank() == 2) {
      std::this_thread::sleep_for(400ms);  // busy elsewhere: never calls #1
      return;
    }
    Tensor t = ones({5});
    c.broadcast(t, 0);  // #1
  });
  EXPECT_NE(err.find("broadcast #1 (f32 x 5, root 0)"), std::string::npos) << err;
  EXPECT_NE(err.find("timed out after 200 ms"), std::string::npos) << err;
  EXPECT_NE(err.find("rank(s) that did not arrive: [2]"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 2 last arrived at #0"), std::string::npos) << err;
}

TEST(ThreadComm, AnAsyncCollectiveDroppedUnwaitedStillReportsItsError) {
  // Rank 0 issues an asynchronous all_reduce that rank 1 never issues, and returns without
  // waiting: the error its rank could not see is run_threads' (was: success).
  const std::string err = run_error(2, [](Communicator& c) {
    c.set_timeout(20s);  // the error names the rank that returned: no deadline is needed
    Tensor t = ones({4});
    if (c.rank() == 0) c.all_reduce(t, ReduceOp::kSum, /*async=*/true);
  });
  EXPECT_NE(err.find("rank 0: "), std::string::npos) << err;
  EXPECT_NE(err.find("all_reduce #0"), std::string::npos) << err;
  EXPECT_NE(err.find("returned without calling it"), std::string::npos) << err;
  EXPECT_NE(err.find("without wait()"), std::string::npos) << err;
}

TEST(ThreadComm, AHugeTimeoutWaitsForEver) {
  // A "no timeout" value (milliseconds::max(), as torch users pass a timedelta of days)
  // saturates the deadline: a late rank is waited for, not blamed at once.
  EXPECT_EQ(run_error(2,
                      [](Communicator& c) {
                        c.set_timeout(std::chrono::milliseconds::max());
                        if (c.rank() == 1) std::this_thread::sleep_for(50ms);
                        c.barrier();
                      }),
            "");
}

TEST(ThreadComm, ARankThatWentPastACollectiveFailsTheRanksWaitingInIt) {
  // Rank 0's all_reduce #0 fails on its own, before it posts (its chunk passes the memory
  // limit), and rank 0 goes on as a retried forward would: its next collective is #1. Rank 1
  // waits in #0 for a rank that will never post there; the group must fail now, naming
  // what rank 0 called instead, not wait for the deadline.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = run_error(2, [](Communicator& c) {
    c.set_timeout(5s);
    Tensor t = ones({4096});
    if (c.rank() == 0) {
      current_ledger()->set_limit(Device::cpu(), memory_stats().total_current + 1000);
      EXPECT_THROW(c.all_reduce(t, ReduceOp::kSum), OutOfMemoryError);
      current_ledger()->set_limit(Device::cpu(), 0);
      c.agree_before_next_collective("a retried forward");
    }
    c.all_reduce(t, ReduceOp::kSum);
  });
  EXPECT_LT(seconds_since(t0), 3.0) << err;
  EXPECT_NE(err.find("all_reduce #0 (f32 x 4096, sum) on rank 1: rank(s) 0 went on without "
                     "calling it; rank 0 called all_gather_bytes [a retried forward] as #1"),
            std::string::npos)
      << err;
}

TEST(ThreadComm, ACollectiveRefusedByAnAbortedCommunicatorIsNotCounted) {
  EXPECT_EQ(run_error(2,
                      [](Communicator& c) {
                        c.abort("stop");
                        Tensor t = ones({8});
                        EXPECT_THROW(c.all_reduce(t, ReduceOp::kSum), AbortedError);
                        EXPECT_THROW(c.barrier(), AbortedError);
                        EXPECT_EQ(c.counters().total_calls(), 0) << c.counters().json();
                        EXPECT_EQ(c.counters().total_bytes(), 0) << c.counters().json();
                      }),
            "");
}

TEST(ThreadComm, ATimeoutThatIsNotPositiveIsRefusedAtTheCall) {
  // As $ZT_COMM_TIMEOUT_MS: a timeout of 0 or less would fail every collective whose
  // peers are not already there, blaming a rank "after -5 ms".
  for (auto bad : {0ms, -5ms}) {
    const std::string err = run_error(1, [&](Communicator& c) { c.set_timeout(bad); });
    EXPECT_NE(
        err.find("set_timeout: " + std::to_string(bad.count()) + " ms is not a positive timeout"),
        std::string::npos)
        << err;
  }
}

TEST(ThreadComm, MaxIsNaNWhereAnyRankHasOne) {
  // As torch.maximum: a NaN on any rank, the last one too, is the maximum.
  EXPECT_EQ(run_error(3,
                      [](Communicator& c) {
                        Tensor t = from_vector({1, c.rank() == 2 ? NAN : 5.0}, {2});
                        c.all_reduce(t, ReduceOp::kMax);
                        const std::vector<double> v = t.to_vector();
                        ZT_CHECK(v[0] == 1 && std::isnan(v[1]), "max: ", v[0], ", ", v[1]);
                      }),
            "");
}

TEST(ThreadComm, RankThatReturnedIsReportedNotWaitedFor) {
  auto t0 = std::chrono::steady_clock::now();
  std::string err = run_error(2, [](Communicator& c) {
    c.set_timeout(20s);
    if (c.rank() == 0) c.barrier();
  });
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_NE(err.find("barrier #0"), std::string::npos) << err;
  EXPECT_NE(err.find("rank(s) 1 returned without calling it"), std::string::npos) << err;
}

TEST(ThreadComm, MismatchedKindReportsBothSides) {
  std::string err = run_error(2, [](Communicator& c) {
    c.set_timeout(500ms);
    if (c.rank() == 0) {
      Tensor t = ones({10});
      c.all_reduce(t, ReduceOp::kSum);
    } else {
      Tensor out = zeros({8}), in = ones({4});
      c.all_gather(out, in);
    }
  });
  EXPECT_NE(err.find("mismatched collectives at sequence #0"), std::string::npos) << err;
  EXPECT_NE(err.find("all_reduce (f32 x 10, sum)"), std::string::npos) << err;
  EXPECT_NE(err.find("all_gather (f32 x 8)"), std::string::npos) << err;
  EXPECT_NE(err.find("different code paths"), std::string::npos) << err;
}

// A label (CollectiveLabel) names the call a collective came from in its signature:
// collectives of one kind and size from different calls are a mismatch too, named.
TEST(ThreadComm, LabelsNameTheCallsAndTellThemApart) {
  std::string err = run_error(2, [](Communicator& c) {
    c.set_timeout(500ms);
    {
      CollectiveLabel outer("outer");
      CollectiveLabel inner("inner");  // the innermost applies
      Tensor t = ones({4});
      c.all_reduce(t, ReduceOp::kSum);
    }
    EXPECT_EQ(CollectiveLabel::current(), nullptr) << "a label ends with its scope";
    CollectiveLabel label(c.rank() == 0 ? "GatheredParameters" : "Engine::step");
    Tensor t = ones({10});
    c.all_reduce(t, ReduceOp::kSum);
  });
  EXPECT_NE(err.find("mismatched collectives at sequence #1"), std::string::npos) << err;
  EXPECT_NE(err.find("all_reduce (f32 x 10, sum) [GatheredParameters]"), std::string::npos) << err;
  EXPECT_NE(err.find("all_reduce (f32 x 10, sum) [Engine::step]"), std::string::npos) << err;
}

TEST(ThreadComm, MismatchedSizeReportsBothSides) {
  std::string err = run_error(3, [](Communicator& c) {
    c.set_timeout(500ms);
    c.barrier();
    Tensor t = ones({c.rank() == 2 ? 12 : 10}, DType::bf16);
    c.all_reduce(t, ReduceOp::kAvg);
  });
  EXPECT_NE(err.find("mismatched collectives at sequence #1"), std::string::npos) << err;
  EXPECT_NE(err.find("all_reduce (bf16 x 10, avg)"), std::string::npos) << err;
  EXPECT_NE(err.find("all_reduce (bf16 x 12, avg)"), std::string::npos) << err;
}

TEST(ThreadComm, BadArgumentsFailAtTheCall) {
  std::string err = run_error(2, [](Communicator& c) {
    Tensor out = zeros({5}), in = ones({3});
    c.all_gather(out, in);
  });
  EXPECT_NE(err.find("all_gather: out has 5 elements"), std::string::npos) << err;
  err = run_error(2, [](Communicator& c) {
    Tensor in = ones({5}), out = zeros({2});
    c.reduce_scatter(out, in, ReduceOp::kSum);
  });
  EXPECT_NE(err.find("pad the input"), std::string::npos) << err;
  err = run_error(2, [](Communicator& c) {
    Tensor in = ones({4}), out = zeros({2}, DType::f64);
    c.reduce_scatter(out, in, ReduceOp::kSum);
  });
  EXPECT_NE(err.find("reduce_scatter: dtypes differ (out f64, in f32)"), std::string::npos) << err;
  err = run_error(2, [](Communicator& c) {
    Tensor in = ones({4}, DType::bf16), out = zeros({2});
    if (c.rank() == 0) c.scatter(out, in, 0);  // the root checks its input
  });
  EXPECT_NE(err.find("scatter: dtypes differ (out f32, in bf16)"), std::string::npos) << err;
  err = run_error(2, [](Communicator& c) {
    Tensor t = ones({4});
    c.broadcast(t, c.size());  // one past the last rank
  });
  EXPECT_NE(err.find("broadcast: root 2 is not a rank of 2"), std::string::npos) << err;
  err = run_error(2, [](Communicator& c) {
    Tensor in = ones({4}), out = zeros({2});
    c.reduce_scatter(out, in, ReduceOp::kMax);
  });
  EXPECT_NE(err.find("reduce_scatter: supports sum and avg, not max"), std::string::npos) << err;
  err = run_error(1, [](Communicator& c) {
    Tensor t = ones({4, 4}).transpose(0, 1);
    c.all_reduce(t, ReduceOp::kSum);
  });
  EXPECT_NE(err.find("not contiguous"), std::string::npos) << err;
}

TEST(ThreadComm, AbortWakesEveryRank) {
  std::string err = run_error(3, [](Communicator& c) {
    c.set_timeout(20s);
    if (c.rank() == 0) {
      std::this_thread::sleep_for(20ms);
      c.abort("stop requested");
      return;
    }
    c.barrier();
  });
  EXPECT_NE(err.find("aborted because stop requested"), std::string::npos) << err;
}

// A rank that fails while a large (not eager) collective is in flight: root 1 has nothing
// to copy and waits in leave(), where the abort wakes it; it unwinds and drops its buffer
// while rank 0's comm thread may still be copying from it. The group keeps posted buffers
// alive until their rank leaves normally, so the copy reads live memory and the caller
// gets rank 0's error (before, large buffers went back to the system: SIGSEGV).
TEST(ThreadComm, ARankFailingDuringALargeCollectiveFreesNothingAPeerReads) {
  constexpr int64_t n = (int64_t{64} << 20) / 4;  // 64 MiB: far above the eager size
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::string err = run_error(2, [](Communicator& c) {  // a constant needs no capture
      Tensor t = full({n}, 1.0 + c.rank());
      c.barrier();
      if (c.rank() == 0) {
        auto pending = c.broadcast(t, 1, /*async=*/true);
        std::this_thread::sleep_for(1ms);
        throw std::runtime_error("rank 0 fails while its broadcast is in flight");
      }
      c.broadcast(t, 1);
    });
    EXPECT_NE(err.find("rank 0 fails while its broadcast is in flight"), std::string::npos) << err;
  }
}

// A rank thread that cannot be created is an error naming it, not std::terminate: here
// every new thread asks for a 1 TiB stack, more than the machine can map.
TEST(ThreadComm, ARankThreadThatCannotStartIsAnError) {
  pthread_attr_t saved, huge;
  ASSERT_EQ(pthread_getattr_default_np(&saved), 0);
  ASSERT_EQ(pthread_attr_init(&huge), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&huge, size_t{1} << 40), 0);
  ASSERT_EQ(pthread_setattr_default_np(&huge), 0);
  bool ran = false;
  const std::string err =
      test::error_of([&] { comm::run_threads(3, [&](comm::Communicator&) { ran = true; }); });
  pthread_setattr_default_np(&saved);
  pthread_attr_destroy(&huge);
  pthread_attr_destroy(&saved);
  EXPECT_NE(err.find("cannot start thread rank 0 of 3"), std::string::npos) << err;
  EXPECT_NE(err.find("run fewer ranks (--ranks)"), std::string::npos) << err;
  EXPECT_FALSE(ran);
}

// Each field of a signature tells collectives apart: the reduction of a reduce_scatter,
// the root of a scatter, the dtype of tensors of one length. Ranks that differ in one
// field meet a mismatch naming both sides, never a collective run with one rank's view.
TEST(ThreadComm, EachSignatureFieldTellsCollectivesApart) {
  std::string err = run_error(2, [](Communicator& c) {
    c.set_timeout(20s);
    Tensor in = ones({4}), out = zeros({2});
    c.reduce_scatter(out, in, c.rank() == 0 ? ReduceOp::kSum : ReduceOp::kAvg);
  });
  EXPECT_NE(err.find("reduce_scatter (f32 x 2, sum)"), std::string::npos) << err;
  EXPECT_NE(err.find("reduce_scatter (f32 x 2, avg)"), std::string::npos) << err;
  err = run_error(2, [](Communicator& c) {
    c.set_timeout(20s);
    Tensor in = ones({4}), out = zeros({2});
    c.scatter(out, in, c.rank());  // each rank names itself the root
  });
  EXPECT_NE(err.find("scatter (f32 x 2, root 0)"), std::string::npos) << err;
  EXPECT_NE(err.find("scatter (f32 x 2, root 1)"), std::string::npos) << err;
  err = run_error(2, [](Communicator& c) {
    c.set_timeout(20s);
    Tensor t = ones({3}, c.rank() == 0 ? DType::f32 : DType::f64);
    c.all_reduce(t, ReduceOp::kSum);
  });
  EXPECT_NE(err.find("all_reduce (f32 x 3, sum)"), std::string::npos) << err;
  EXPECT_NE(err.find("all_reduce (f64 x 3, sum)"), std::string::npos) << err;
}

// Of two ranks that fail in turn, the first one's error is the one run_threads raises:
// rank 1 fails only after rank 0's failure aborted the barrier it waits in.
TEST(ThreadComm, TheFirstRankToFailIsTheErrorReported) {
  const std::string err = run_error(2, [](Communicator& c) {
    c.set_timeout(20s);
    if (c.rank() == 0) throw std::runtime_error("rank 0 fails first");
    try {
      c.barrier();
    } catch (const AbortedError&) {
      throw std::runtime_error("rank 1 fails second");
    }
  });
  EXPECT_EQ(err, "rank 0 fails first");
}

// Tensors that share a buffer without overlapping (out right after in, or before it) are
// not in place and not an overlap: the collective takes them.
TEST(ThreadComm, AdjacentPiecesOfOneBufferAreNotAnOverlap) {
  EXPECT_EQ(run_error(2,
                      [](Communicator& c) {
                        Tensor buf = zeros({6});
                        Tensor in = buf.narrow(0, 0, 2), out = buf.narrow(0, 2, 4);
                        in.fill_(1.0 + c.rank());
                        c.all_gather(out, in);
                        checks::expect_values(out, {1, 1, 2, 2}, "all_gather after its input");
                        Tensor rs_out = buf.narrow(0, 0, 2), rs_in = buf.narrow(0, 2, 4);
                        c.reduce_scatter(rs_out, rs_in, ReduceOp::kSum);
                        const double v = c.rank() == 0 ? 2.0 : 4.0;
                        checks::expect_values(rs_out, {v, v}, "reduce_scatter before its input");
                      }),
            "");
}

// An abort keeps its first reason: a later abort (a rank failing because of the first)
// does not replace the cause every rank reports.
TEST(ThreadComm, TheFirstAbortReasonIsKept) {
  std::string reason;
  run_threads(1, [&](Communicator& c) {
    c.abort("the first reason");
    c.abort("a later reason");
    reason = c.abort_reason();
  });
  EXPECT_EQ(reason, "the first reason");
}

// Of two dropped async collectives that both fail, the first one's error is reported: the
// second fails only because the first aborted the group.
TEST(ThreadComm, OfTwoDroppedCollectivesTheFirstFailureIsReported) {
  const std::string err = run_error(2, [](Communicator& c) {
    c.set_timeout(20s);
    if (c.rank() == 1) return;
    Tensor a = ones({4}), b = ones({4});
    c.all_reduce(a, ReduceOp::kSum, /*async=*/true);
    c.all_reduce(b, ReduceOp::kSum, /*async=*/true);
  });
  EXPECT_NE(err.find("rank 0: zt.comm: all_reduce #0 (f32 x 4, sum) on rank 0: rank(s) 1 "
                     "returned without calling it"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("all_reduce #1"), std::string::npos) << err;
}

// wait() on an async collective that failed raises its error on the waiting rank.
TEST(ThreadComm, WaitingOnAFailedAsyncCollectiveRaisesItsError) {
  std::string waited;
  run_error(2, [&](Communicator& c) {
    c.set_timeout(20s);
    if (c.rank() == 1) return;
    Tensor t = ones({4});
    std::shared_ptr<Work> w = c.all_reduce(t, ReduceOp::kSum, /*async=*/true);
    waited = test::error_of([&] { w->wait(); });
  });
  EXPECT_NE(waited.find("all_reduce #0 (f32 x 4, sum) on rank 0: rank(s) 1 returned without "
                        "calling it"),
            std::string::npos)
      << waited;
}

TEST(Launch, PlainStartUsesThreadRanks) {
  ASSERT_FALSE(under_mpirun());
  std::atomic<int> seen{0};
  launch(3, [&](Communicator& c) {
    EXPECT_STREQ(c.backend(), "thread");
    EXPECT_EQ(c.size(), 3);
    seen += 1;
  });
  EXPECT_EQ(seen.load(), 3);
}

// launch()'s options reach every thread rank: its collective deadline and the memory limit
// of its own ledger.
TEST(Launch, OptionsSetEachRanksTimeoutAndMemoryLimit) {
  LaunchOptions o;
  o.ranks = 2;
  o.timeout = 1234ms;
  o.memory_limit = int64_t{3} << 20;
  std::atomic<int> seen{0};
  launch(o, [&](Communicator& c) {
    EXPECT_EQ(c.timeout(), 1234ms);
    EXPECT_EQ(current_ledger()->limit(Device::cpu()), o.memory_limit);
    seen += 1;
  });
  EXPECT_EQ(seen.load(), 2);
}
