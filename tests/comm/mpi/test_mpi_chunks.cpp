// MpiComm splits a collective over more elements per rank than its chunk limit (MPI's int
// counts: INT_MAX) into several MPI calls. With the limit lowered to a few elements, small
// tensors split too, at sizes the limit does not divide: every collective still gives what
// one call gives (the closed forms of comm/checks.h, and the bits of an MpiComm that does
// not split), each rank's slice keeps its place, the same-collective check runs once per
// collective, and no MPI call moves more than the limit (counted through MPI's profiling
// interface, mpi_calls.h).
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <functional>

#include "comm/checks.h"
#include "comm/mpi/mpi_calls.h"
#include "common/test_util.h"
#include "zero/comm/mpi_comm.h"

using namespace zt;
using namespace zt::comm;
using namespace std::chrono_literals;
namespace mpi_calls = zt::test::mpi_calls;

namespace {

std::unique_ptr<MpiComm> make_comm(int64_t chunk_limit) {
  auto c = std::make_unique<MpiComm>();
  c->set_timeout(20s);
  c->set_chunk_limit(chunk_limit);
  return c;
}

// Random values, a different stream per rank and salt.
Tensor input(int rank, int64_t numel, DType dt, int salt) {
  Generator g(1000 * salt + rank);
  return randn({numel}, g).to(dt);
}

// The results of one run of every collective on `c` (in place ones included), with sizes
// that 3 does not divide.
std::vector<Tensor> run_every_collective(Communicator& c, DType dt) {
  const int n = c.size(), r = c.rank();
  const int64_t s = 10;
  std::vector<Tensor> got;
  Tensor gathered = zeros({n * s}, dt);
  c.all_gather(gathered, input(r, s, dt, 1));
  got.push_back(gathered);
  Tensor in_place = zeros({n * s}, dt);
  in_place.narrow(0, r * s, s).copy_(input(r, s, dt, 2));
  c.all_gather(in_place, in_place.narrow(0, r * s, s));
  got.push_back(in_place);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    Tensor out = zeros({s}, dt);
    c.reduce_scatter(out, input(r, n * s, dt, 3), op);
    got.push_back(out);
  }
  Tensor rs = input(r, n * s, dt, 4);
  c.reduce_scatter(rs.narrow(0, r * s, s), rs, ReduceOp::kSum);
  got.push_back(rs.narrow(0, r * s, s));
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    Tensor t = input(r, 29, dt, 5);
    c.all_reduce(t, op);
    got.push_back(t);
  }
  Tensor b = input(r, 11, dt, 6);
  c.broadcast(b, n - 1);
  got.push_back(b);
  Tensor scattered = zeros({s}, dt);
  c.scatter(scattered, r == n - 1 ? input(r, n * s, dt, 7) : Tensor(), n - 1);
  got.push_back(scattered);
  Tensor sc_in = r == 0 ? input(r, n * s, dt, 8) : Tensor();
  Tensor sc_out = r == 0 ? sc_in.narrow(0, 0, s) : zeros({s}, dt);
  c.scatter(sc_out, sc_in, 0);
  got.push_back(sc_out);
  return got;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * dtype_size(a.dtype())) == 0;
}

}  // namespace

TEST(MpiCommChunks, EveryCollectiveInChunksOfAFewElements) {
  auto c = make_comm(3);
  EXPECT_NO_THROW(checks::every_collective(*c));
  c->set_chunk_limit(4093);  // the edges' 40,001 elements a rank in 10 calls
  EXPECT_NO_THROW(checks::every_collective_at_the_edges(*c));
  c->set_chunk_limit(2);  // the counters count collectives, not MPI calls
  EXPECT_NO_THROW(checks::counters_match_textbook(*c));
  c->set_chunk_limit(1000);
  EXPECT_NO_THROW(checks::async_completes_while_computing(*c));
}

TEST(MpiCommChunks, SplitCollectivesGiveTheBitsOfOneCall) {
  // Random values, so that a misplaced element or a reduction in another order shows; the
  // 16-bit types reduce in fp32 and round once, whatever the split.
  auto whole = make_comm(INT_MAX), split = make_comm(3);
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<Tensor> want = run_every_collective(*whole, dt);
    const std::vector<Tensor> got = run_every_collective(*split, dt);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_bits(got[i], want[i])) << "result " << i << " differs";
  }
  const std::string mine(5 + 3 * split->rank(), static_cast<char>('a' + split->rank()));
  EXPECT_EQ(split->all_gather_bytes(mine), whole->all_gather_bytes(mine));
}

TEST(MpiCommChunks, NoCallMovesMoreThanTheLimit) {
  const int64_t limit = 4;
  auto c = make_comm(limit), whole = make_comm(INT_MAX);
  const int n = c->size();
  struct Want {
    const char* function;
    int64_t calls;        // of `function` by one collective
    int64_t whole_calls;  // by one collective on `whole`
    int64_t largest;      // bytes one call may move between two ranks
  };
  // Runs `collective` on c and on whole, each with one same-collective check.
  auto expect = [&](const char* what, const std::vector<Want>& wants,
                    const std::function<void(Communicator&)>& collective) {
    SCOPED_TRACE(what);
    for (MpiComm* comm : {c.get(), whole.get()}) {
      mpi_calls::reset();
      collective(*comm);
      EXPECT_EQ(mpi_calls::of("MPI_Iallreduce").calls, 1) << "the check, once";
      for (const Want& w : wants) {
        const mpi_calls::Tally t = mpi_calls::of(w.function);
        EXPECT_EQ(t.calls, comm == c.get() ? w.calls : w.whole_calls) << w.function;
        if (comm == c.get()) {
          EXPECT_LE(t.largest_block, w.largest) << w.function;
        }
      }
    }
  };
  const int64_t f32 = 4, s = 10;  // 10 f32 a rank: calls of 4, 4 and 2
  expect("all_gather", {{"MPI_Iallgather", 3, 1, limit * f32}},
         [&](Communicator& comm) { comm.all_gather(zeros({n * s}), ones({s})); });
  expect("reduce_scatter", {{"MPI_Ialltoall", 3, 1, limit * f32}}, [&](Communicator& comm) {
    comm.reduce_scatter(zeros({s}), ones({n * s}), ReduceOp::kSum);
  });
  expect("all_reduce",
         {{"MPI_Ialltoallv", 3, 1, limit * f32}, {"MPI_Iallgatherv", 3, 1, limit * f32}},
         [&](Communicator& comm) { comm.all_reduce(zeros({s}), ReduceOp::kSum); });
  expect("broadcast", {{"MPI_Ibcast", 3, 1, limit * f32}},
         [&](Communicator& comm) { comm.broadcast(zeros({s}), 0); });
  expect("scatter", {{"MPI_Iscatter", 3, 1, limit * f32}}, [&](Communicator& comm) {
    comm.scatter(zeros({s}), comm.rank() == 0 ? zeros({n * s}) : Tensor(), 0);
  });
  // Bytes: rounds of limit / N bytes a rank (1 at least), after one gather of the lengths.
  const int64_t longest = 3 + 2 * (n - 1), quota = std::max<int64_t>(1, limit / n);
  expect(
      "all_gather_bytes",
      {{"MPI_Iallgather", 1, 1, 8}, {"MPI_Iallgatherv", (longest + quota - 1) / quota, 1, quota}},
      [&](Communicator& comm) {
        const int r = comm.rank();
        std::vector<std::string> got = comm.all_gather_bytes(std::string(3 + 2 * r, 'a' + r));
        for (int j = 0; j < n; ++j) EXPECT_EQ(got[j], std::string(3 + 2 * j, 'a' + j));
      });
}

TEST(MpiCommChunks, TheSameCollectiveCheckComesBeforeTheSplitCalls) {
  // Rank 0 broadcasts 6 elements in calls of 2, the others all-reduce 7: the check names
  // both before any rank starts its calls.
  auto c = make_comm(2);
  c->barrier();  // #0
  const std::string err = test::error_of([&] {
    Tensor t = ones({c->rank() == 0 ? 6 : 7});
    if (c->rank() == 0)
      c->broadcast(t, 0);
    else
      c->all_reduce(t, ReduceOp::kSum);
  });
  EXPECT_NE(err.find("mismatched collectives at sequence #1: rank 0 called broadcast (f32 x 6, "
                     "root 0), rank 1 called all_reduce (f32 x 7, sum)"),
            std::string::npos)
      << err;
}

TEST(MpiCommChunks, TheLimitIsAtLeastOneAndAtMostIntMax) {
  auto c = make_comm(INT_MAX);
  EXPECT_EQ(c->chunk_limit(), INT_MAX);
  EXPECT_TRUE(test::throws_with([&] { c->set_chunk_limit(0); },
                                "MpiComm::set_chunk_limit: 0 elements; the limit must be in "
                                "[1, INT_MAX]"));
  EXPECT_THROW(c->set_chunk_limit(int64_t{INT_MAX} + 1), Error);
  c->set_chunk_limit(7);
  EXPECT_EQ(c->chunk_limit(), 7);
}
