// Collective checks shared by the thread-rank tests and the mpirun tests. Each check
// runs on one rank, fills inputs with values that depend on (rank, index), runs one
// collective and throws zt::Error naming the first mismatches, so a failure on any rank
// reaches the test (through run_threads, or the process's own gtest run).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/ops.h"
#include "zero/comm/communicator.h"
#include "zero/comm/reduce.h"

namespace zt::comm::checks {

/// The dtypes every collective is checked with.
inline const std::vector<DType> kDTypes = {DType::f32, DType::bf16, DType::i64,
                                           DType::f16, DType::f64,  DType::i32};

/// Small integers: exact in every dtype, and so are their sums over four ranks.
inline double value(int rank, int64_t i, int salt = 0) {
  return static_cast<double>((rank * 7 + i * 3 + salt * 5) % 17) - 5.0;
}

/// A [numel] tensor of value(rank, i, salt).
inline Tensor filled(int rank, int64_t numel, DType dt, int salt = 0, Device dev = Device::cpu()) {
  std::vector<double> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) v[i] = value(rank, i, salt);
  return from_vector(v, {numel}, dt, dev);
}

inline double tolerance(DType dt) {
  switch (dt) {
    case DType::f32:
      return 1e-6;
    case DType::f64:
      return 1e-12;
    case DType::bf16:
      return 8e-3;
    case DType::f16:
      return 1e-3;
    default:
      return 0.0;
  }
}

/// Throws naming the first (up to 5) mismatches of t against expected.
inline void expect_values(const Tensor& t, const std::vector<double>& expected,
                          const std::string& what) {
  std::vector<double> got = t.to_vector();
  ZT_CHECK(got.size() == expected.size(), what, ": ", got.size(), " values, expected ",
           expected.size());
  const double tol = tolerance(t.dtype());
  std::string bad;
  int n_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - expected[i]) <= tol * (1.0 + std::abs(expected[i]))) continue;
    if (n_bad++ < 5) bad += detail::cat(" [", i, "] got ", got[i], " want ", expected[i], ";");
  }
  ZT_CHECK(n_bad == 0, what, " (", dtype_name(t.dtype()), "): ", n_bad, " mismatches:", bad);
}

/// The reduction of value(j, i, salt) over ranks j, as the communicator defines it.
inline double reduced(ReduceOp op, int n, int64_t i, DType dt, int salt = 0) {
  double acc = value(0, i, salt);
  for (int j = 1; j < n; ++j)
    acc = op == ReduceOp::kMax ? std::max(acc, value(j, i, salt)) : acc + value(j, i, salt);
  if (op == ReduceOp::kAvg)
    acc = is_floating(dt) ? acc / n : static_cast<double>(static_cast<int64_t>(acc) / n);
  return acc;
}

inline void all_gather(Communicator& c, DType dt, int64_t s, bool in_place = false) {
  const int n = c.size(), r = c.rank();
  Tensor out = zeros({n * s}, dt, c.device());
  Tensor in = filled(r, s, dt, 0, c.device());
  if (in_place) {
    out.narrow(0, r * s, s).copy_(in);
    in = out.narrow(0, r * s, s);
  }
  c.all_gather(out, in);
  std::vector<double> want;
  for (int j = 0; j < n; ++j)
    for (int64_t i = 0; i < s; ++i) want.push_back(value(j, i));
  expect_values(out, want, detail::cat("all_gather s=", s, " N=", n));
}

inline void reduce_scatter(Communicator& c, DType dt, int64_t s, ReduceOp op,
                           bool in_place = false) {
  const int n = c.size(), r = c.rank();
  Tensor in = filled(r, n * s, dt, 0, c.device());
  Tensor out = in_place ? in.narrow(0, r * s, s) : zeros({s}, dt, c.device());
  c.reduce_scatter(out, in, op);
  std::vector<double> want;
  for (int64_t i = 0; i < s; ++i) want.push_back(reduced(op, n, r * s + i, dt));
  expect_values(out, want, detail::cat("reduce_scatter ", reduce_op_name(op), " s=", s, " N=", n));
}

inline void all_reduce(Communicator& c, DType dt, int64_t numel, ReduceOp op) {
  const int n = c.size(), r = c.rank();
  Tensor t = filled(r, numel, dt, 1, c.device());
  c.all_reduce(t, op);
  std::vector<double> want;
  for (int64_t i = 0; i < numel; ++i) want.push_back(reduced(op, n, i, dt, 1));
  expect_values(t, want, detail::cat("all_reduce ", reduce_op_name(op), " n=", numel, " N=", n));
}

inline void broadcast(Communicator& c, DType dt, int64_t numel, int root) {
  Tensor t = filled(c.rank(), numel, dt, 2, c.device());
  c.broadcast(t, root);
  std::vector<double> want;
  for (int64_t i = 0; i < numel; ++i) want.push_back(value(root, i, 2));
  expect_values(t, want, detail::cat("broadcast root=", root, " n=", numel));
}

inline void scatter(Communicator& c, DType dt, int64_t s, int root, bool in_place = false) {
  const int n = c.size(), r = c.rank();
  Tensor in = r == root ? filled(root, n * s, dt, 3, c.device()) : Tensor();
  // In place: the root's own piece is already where it goes.
  Tensor out = in_place && r == root ? in.narrow(0, r * s, s) : zeros({s}, dt, c.device());
  c.scatter(out, in, root);
  std::vector<double> want;
  for (int64_t i = 0; i < s; ++i) want.push_back(value(root, r * s + i, 3));
  expect_values(out, want, detail::cat("scatter root=", root, " s=", s));
}

/// The paths every_collective's small sizes do not reach: inputs past the 64 KiB a thread
/// rank copies (it then posts its buffer itself and waits for the others to read it, as
/// ZeRO's buckets do), results written in place, zero elements, and bools moved as bytes.
inline void every_collective_at_the_edges(Communicator& c) {
  const int n = c.size(), r = c.rank();
  for (DType dt : {DType::f32, DType::bf16, DType::i32}) {
    const int64_t s = 40'001;  // 80 KB or more an input
    all_gather(c, dt, s);
    all_gather(c, dt, s, /*in_place=*/true);
    reduce_scatter(c, dt, s, ReduceOp::kSum);
    reduce_scatter(c, dt, s, ReduceOp::kSum, /*in_place=*/true);
    scatter(c, dt, s, n - 1, /*in_place=*/true);
    broadcast(c, dt, s, n - 1);
    all_gather(c, dt, 0);
    reduce_scatter(c, dt, 0, ReduceOp::kAvg);
    all_reduce(c, dt, 0, ReduceOp::kSum);
    broadcast(c, dt, 0, 0);
    scatter(c, dt, 0, 0);
  }
  Tensor bits = from_vector({r % 2 == 0 ? 1.0 : 0.0, 1.0}, {2}, DType::b8, c.device());
  Tensor all = zeros({2 * n}, DType::b8, c.device());
  c.all_gather(all, bits);
  std::vector<double> want;
  for (int j = 0; j < n; ++j) want.insert(want.end(), {j % 2 == 0 ? 1.0 : 0.0, 1.0});
  expect_values(all, want, "all_gather of bools");
  c.broadcast(bits, n - 1);
  expect_values(bits, {(n - 1) % 2 == 0 ? 1.0 : 0.0, 1.0}, "broadcast of bools");
}

/// Every collective, every dtype, sizes that do not divide evenly.
inline void every_collective(Communicator& c) {
  const int n = c.size();
  for (DType dt : kDTypes) {
    for (int64_t s : {1, 7}) {
      all_gather(c, dt, s);
      all_gather(c, dt, s, /*in_place=*/true);
      reduce_scatter(c, dt, s, ReduceOp::kSum);
      reduce_scatter(c, dt, s, ReduceOp::kAvg);
      scatter(c, dt, s, n - 1);
    }
    for (int64_t numel : {1, 10, 13}) {  // n < N leaves ranks with empty chunks
      all_reduce(c, dt, numel, ReduceOp::kSum);
      all_reduce(c, dt, numel, ReduceOp::kAvg);
      all_reduce(c, dt, numel, ReduceOp::kMax);
      broadcast(c, dt, numel, numel % n);
    }
  }
  Tensor flags = from_vector({0, c.rank() == n - 1 ? 1.0 : 0.0}, {2}, DType::b8, c.device());
  c.all_reduce(flags, ReduceOp::kMax);
  expect_values(flags, {0, 1}, "all_reduce max over bool");
  c.barrier();
  std::vector<std::string> got = c.all_gather_bytes(std::string(c.rank() + 1, 'a' + c.rank()));
  ZT_CHECK(static_cast<int>(got.size()) == n, "all_gather_bytes: ", got.size(), " entries");
  for (int j = 0; j < n; ++j)
    ZT_CHECK(got[j] == std::string(j + 1, 'a' + j), "all_gather_bytes: rank ", j, " sent '", got[j],
             "'");
  std::vector<uint64_t> hashes = c.all_gather_object<uint64_t>(1000u + c.rank());
  for (int j = 0; j < n; ++j)
    ZT_CHECK(hashes[j] == 1000u + j, "all_gather_object: rank ", j, " sent ", hashes[j]);
}

/// Byte counters equal the textbook volumes (see CommCounters) for a known sequence.
inline void counters_match_textbook(Communicator& c) {
  const int n = c.size(), r = c.rank();
  c.reset_counters();
  Tensor a = zeros({5}, DType::f32, c.device()), ag = zeros({5 * n}, DType::f32, c.device());
  c.all_gather(ag, a);
  Tensor rs_in = zeros({4 * n}, DType::bf16, c.device()),
         rs_out = zeros({4}, DType::bf16, c.device());
  c.reduce_scatter(rs_out, rs_in, ReduceOp::kAvg);
  Tensor ar = zeros({10}, DType::f32, c.device());
  c.all_reduce(ar, ReduceOp::kSum);
  c.all_reduce(ar, ReduceOp::kSum, true)->wait();
  Tensor bc = zeros({6}, DType::i64, c.device());
  c.broadcast(bc, n - 1);
  Tensor sc_out = zeros({3}, DType::f32, c.device());
  c.scatter(sc_out, r == 0 ? zeros({3 * n}, DType::f32, c.device()) : Tensor(), 0);
  c.barrier();
  c.all_gather_bytes(std::string(r + 1, 'x'));
  CommCounters k = c.counters();
  int64_t total_bytes = 0;
  auto expect = [&](Collective kind, int64_t calls, int64_t bytes) {
    ZT_CHECK(k[kind].calls == calls && k[kind].bytes == bytes, collective_name(kind),
             " counters on rank ", r, ": calls ", k[kind].calls, " bytes ", k[kind].bytes,
             ", expected calls ", calls, " bytes ", bytes);
    const std::string entry =
        detail::cat('"', collective_name(kind), "\":{\"calls\":", calls, ",\"bytes\":", bytes, '}');
    ZT_CHECK(k.json().find(entry) != std::string::npos, "json() lacks ", entry, ": ", k.json());
    total_bytes += bytes;
  };
  expect(Collective::kAllGather, 1, (n - 1) * 5 * 4);
  expect(Collective::kReduceScatter, 1, (n - 1) * 4 * 2);
  expect(Collective::kAllReduce, 2, 2 * (2 * (n - 1) * 10 * 4 / n));
  expect(Collective::kBroadcast, 1, r == n - 1 ? 0 : 6 * 8);
  expect(Collective::kScatter, 1, r == 0 ? 0 : 3 * 4);
  expect(Collective::kBarrier, 1, 0);
  expect(Collective::kAllGatherBytes, 1, n * (n + 1) / 2 - (r + 1));
  ZT_CHECK(k.total_calls() == 8, "total calls ", k.total_calls());
  ZT_CHECK(k.total_bytes() == total_bytes, "total bytes ", k.total_bytes(), ", expected ",
           total_bytes);
  c.reset_counters();
  ZT_CHECK(c.counters().total_calls() == 0 && c.counters().total_bytes() == 0,
           "reset_counters left ", c.counters().json());
}

/// An async all_reduce finishes while this rank keeps computing and never calls wait().
/// The last rank issues it late, so on every other rank it is still running when the
/// call returns: a collective that completed before returning (ran synchronously) fails.
inline void async_completes_while_computing(Communicator& c) {
  // No rank's collective can complete before the late rank issues it. Another rank would
  // have to stall that long between the call's return and its first test() to see it
  // done: far longer than a loaded machine keeps a runnable thread waiting.
  const auto kLate = std::chrono::milliseconds(200);
  const bool late = c.rank() == c.size() - 1;  // one rank alone: nothing to observe
  if (late && c.size() > 1) std::this_thread::sleep_for(kLate);
  Tensor t = filled(c.rank(), 1 << 16, DType::f32, 1, c.device());
  std::shared_ptr<Work> w = c.all_reduce(t, ReduceOp::kSum, /*async=*/true);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  double busy = 0;
  int64_t rounds = 0;   // of computing while the collective was still running
  while (!w->test()) {  // the caller computes; only the communication thread can finish it
    ZT_CHECK(std::chrono::steady_clock::now() < deadline, "async all_reduce never completed (",
             rounds, " rounds of work, sum ", busy, ")");
    for (int i = 0; i < 1000; ++i) busy += std::sqrt(static_cast<double>(i + rounds));
    ++rounds;
  }
  ZT_CHECK(late || rounds > 0, "rank ", c.rank(), ": the async all_reduce had completed when ",
           "it returned, although rank ", c.size() - 1, " issued it ", kLate.count(),
           " ms later: it ran synchronously");
  w->wait();
  std::vector<double> want;
  for (int64_t i = 0; i < (1 << 16); ++i)
    want.push_back(reduced(ReduceOp::kSum, c.size(), i, DType::f32, 1));
  expect_values(t, want, "async all_reduce");
}

}  // namespace zt::comm::checks
