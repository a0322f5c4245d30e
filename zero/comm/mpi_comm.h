// MpiComm: one rank per process under mpirun (OpenMPI), CPU tensors. Collectives run as
// nonblocking MPI on a communication thread that polls them against the deadline, so
// async work progresses while the caller computes. Reductions move shards with
// MPI_Ialltoall(v) and combine them with the shared fixed-order kernel, so results are
// bitwise equal to ThreadComm's. MPI counts are int: a collective over more elements per
// rank than the chunk limit (INT_MAX) runs as several MPI calls (mpi_collectives.cpp).
#pragma once

#include <mpi.h>

#include <atomic>
#include <climits>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/comm/executor.h"

namespace zt::comm::internal {
/// MPI's text for an error code.
std::string mpi_error_text(int rc);
[[noreturn]] void throw_mpi_error(const char* file, int line, const char* call, int rc);
}  // namespace zt::comm::internal

/// Throws zt::Error naming the MPI call, its error string, file and line.
#define MPI_CHECK(call)                                                             \
  do {                                                                              \
    int zt_mpi_rc_ = (call);                                                        \
    if (zt_mpi_rc_ != MPI_SUCCESS)                                                  \
      ::zt::comm::internal::throw_mpi_error(__FILE__, __LINE__, #call, zt_mpi_rc_); \
  } while (0)

namespace zt::comm {

/// Initializes MPI once per process (MPI_THREAD_MULTIPLE when available, at least
/// SERIALIZED required) and finalizes it at exit. Safe to call repeatedly. Throws where the
/// launcher announced another job size (OMPI_COMM_WORLD_SIZE, else PMI_SIZE) than
/// MPI_COMM_WORLD's: a launcher of another MPI, whose processes are each a world of one.
void mpi_init();
/// When MPI is running with more than one process: prints "zt.comm: rank R aborts the MPI
/// job: <reason>" and ends the whole job (MPI_Abort). Otherwise returns. Also for a rank
/// that fails before its communicator exists: returning from main would leave it in
/// MPI_Finalize, waiting for ranks that wait for it in their first collective.
void abort_job_if_shared(const std::string& reason);
/// Serializes MPI calls while in scope when MPI lacks MPI_THREAD_MULTIPLE (every call of zt,
/// on any thread; a thread may nest them); no-op otherwise.
class MpiLock {
 public:
  MpiLock();
  ~MpiLock();
  MpiLock(const MpiLock&) = delete;
  MpiLock& operator=(const MpiLock&) = delete;

 private:
  bool locked_ = false;
};

/// One process of an mpirun job, on a private duplicate of MPI_COMM_WORLD.
/// A collective that fails on this rank after its first MPI call (an MPI error, a timeout,
/// or a failure of its own) leaves the communicator failed, without ending the job: the
/// other ranks may be inside that collective, and MPI would pair this rank's next calls with
/// theirs. Every later call then throws AbortedError ("... aborted because the communicator
/// is unusable since <collective> failed on this rank ...: <why>"), as abort_reason() says.
/// A collective that fails before any MPI call (its arguments, or its scratch tensor, which
/// it makes before the check) leaves it usable: where every rank failed alike, they may
/// retry; a rank that failed alone meets the others' collective with its next one, which
/// the check reports as a mismatch on every rank.
class MpiComm : public Communicator {
 public:
  /// Collective over MPI_COMM_WORLD: every process must construct its MpiComms in the
  /// same order. Throws when the others have not made theirs within the timeout
  /// ($ZT_COMM_TIMEOUT_MS, as every new communicator's).
  MpiComm();
  /// Finishes queued work and frees the communicator. The memory of a request abandoned by
  /// a timeout or an abort that is still pending then (its peers never came) is kept for
  /// the life of the process, since MPI may still write into it.
  ~MpiComm() override;

  const char* backend() const override { return "mpi"; }
  /// Fails local work with `reason`; with more than one rank, ends the job (MPI_Abort),
  /// since MPI cannot wake peers blocked in a collective.
  void abort(const std::string& reason) override;
  std::string abort_reason() const override;
  std::exception_ptr finish_queued() override;
  /// The underlying MPI communicator.
  MPI_Comm handle() const { return comm_; }
  /// Whether each collective first checks that every rank issued the same one (kind,
  /// dtype, size, op, root: Communicator::signature), with one all-reduce of 16 bytes,
  /// and on a mismatch fails at once on every rank naming what each called. On by
  /// default: MPI cannot tell a collective of another size, and would hang until the
  /// timeout or read past a buffer. Every rank must set the same value.
  void set_check_collectives(bool on) { check_.store(on, std::memory_order_relaxed); }
  bool checks_collectives() const { return check_.load(std::memory_order_relaxed); }
  /// The most elements (of the tensor's dtype; bytes for all_gather_bytes) one MPI call
  /// moves per rank: INT_MAX, MPI's count limit, by default. A larger collective runs as
  /// several calls of at most this many, with the same result as one call: all_reduce and
  /// broadcast split the tensor, all_gather, reduce_scatter and scatter each rank's slice
  /// (all_reduce's and all_gather_bytes' calls carry a 1/N share of the limit per rank).
  /// Lowering it is for tests, to run the splitting on small tensors; at least 1. Read
  /// when a collective is issued; every rank must set the same value.
  void set_chunk_limit(int64_t elements);
  /// The chunk limit collectives issued now get (set_chunk_limit).
  int64_t chunk_limit() const { return limit_.load(std::memory_order_relaxed); }

 protected:
  std::shared_ptr<Work> submit(Request req) override;

 private:
  // The memory the MPI requests of one collective read or write: its tensors and scratch
  // tensors, and host buffers (counts, small messages, the check's words). A request that
  // is abandoned (a timeout, an abort, an MPI error) keeps it until the request completes
  // (a late peer arrives), so that MPI never writes into memory that was freed or handed
  // out again.
  struct Held {
    std::vector<Tensor> tensors;
    std::vector<std::shared_ptr<const void>> host;
    // Keeps `value` with the rest; the reference stays valid as long as this does.
    template <typename T>
    T& hold(T value) {
      auto p = std::make_shared<T>(std::move(value));
      T& r = *p;
      host.push_back(std::move(p));
      return r;
    }
  };
  // What the MPI calls of one collective share: its name in errors, its deadline and the
  // timeout it came from, the chunk limit as it stood at issue, the memory its requests
  // use, and whether one of them was started (the other ranks may then be inside it).
  struct Call {
    std::string what;
    std::chrono::milliseconds timeout;
    Deadline deadline;
    int64_t limit;
    std::shared_ptr<Held> held;
    mutable bool started = false;  // set by start_and_wait
  };
  // A request left pending by a failed wait, with the memory it may still use.
  struct Abandoned {
    MPI_Request request;
    std::shared_ptr<Held> held;
  };

  // Runs req; `check`: compare the ranks' signatures first (the switch as at issue). A
  // failure after the collective's first MPI call fails the communicator (class comment).
  void execute(const Request& req, bool check, int64_t limit);
  // The scratch tensor, the check, then the collective itself.
  void run(const Request& req, const Call& call, bool check);
  // The scratch a reduce-scatter or an all-reduce of req receives the others' shards in
  // (undefined for the other collectives): for its largest MPI call of `limit` elements.
  Tensor scratch_for(const Request& req, int64_t limit) const;
  // Fails every rank, naming what each called, when the ranks' signatures of req differ.
  void check_signatures(const Request& req, const Call& call);
  // The collectives, each as MPI calls of at most call.limit elements per rank
  // (mpi_collectives.cpp).
  void all_gather_chunks(const Request& req, const Call& call);
  void reduce_scatter_chunks(const Request& req, const Call& call, const Tensor& scratch);
  void all_reduce_chunks(const Request& req, const Call& call, const Tensor& scratch);
  void broadcast_chunks(const Request& req, const Call& call);
  void scatter_chunks(const Request& req, const Call& call);
  // Every rank's `mine`, in rank order.
  std::vector<std::string> gather_bytes(std::shared_ptr<const std::string> mine, const Call& call);
  // Starts one MPI request with `start` (under MpiLock; `name` is the MPI function, for
  // errors) and waits for it.
  void start_and_wait(const Call& call, const char* name,
                      const std::function<int(MPI_Request*)>& start);
  // Polls req until done, the deadline, or an abort; on failure the request and
  // call.held go to abandoned_ before the error is thrown.
  void wait_request(MPI_Request* req, const Call& call);
  // Keeps a request that is left pending, and call.held, in abandoned_.
  void abandon(MPI_Request req, const Call& call);
  // Drops the memory of the abandoned requests that completed since; the pending ones'
  // is kept for the life of the process (at destruction).
  void release_abandoned();
  /// `call` returned `rc` for collective `what`: fails this communicator (its request may
  /// still reference comm_) and throws, naming both.
  [[noreturn]] void fail_call(const std::string& what, const char* call, int rc);
  void fail(const std::string& reason);

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool leaked_ = false;                  // an unfinished request still references comm_
  std::vector<Abandoned> abandoned_;     // used by the communication thread, then ~MpiComm
  std::atomic<bool> check_{true};        // set by the rank, read by the communication thread
  std::atomic<int64_t> limit_{INT_MAX};  // set by the rank, read at issue
  mutable std::mutex mu_;
  std::string abort_reason_;
  std::unique_ptr<Executor> exec_;
};

}  // namespace zt::comm
