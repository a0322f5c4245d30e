// ThreadComm: N ranks as threads of one process, sharing memory. run_threads starts them;
// the first exception on any rank reaches the caller, and the other ranks fail fast.
// Reductions combine ranks in the fixed order 0..N-1, so results never depend on timing.
#pragma once

#include <functional>
#include <memory>

#include "zero/comm/communicator.h"
#include "zero/comm/executor.h"
#include "zero/comm/thread_group.h"

namespace zt::comm {

/// One thread rank. Collectives run on this rank's communication thread, in issue order.
class ThreadComm : public Communicator {
 public:
  /// Rank `rank` of `group`; call on the rank's own thread (its memory ledger is used).
  ThreadComm(std::shared_ptr<ThreadGroup> group, int rank);
  /// Finishes queued work, then tells the group this rank is gone.
  ~ThreadComm() override;

  const char* backend() const override { return "thread"; }
  /// Aborts the whole group: every rank's waits fail with `reason`.
  void abort(const std::string& reason) override;
  std::string abort_reason() const override;

 protected:
  std::shared_ptr<Work> submit(Request req) override;

 private:
  void execute(const Request& req);

  std::shared_ptr<ThreadGroup> group_;
  std::unique_ptr<Executor> exec_;
};

/// Runs fn(comm) on n thread ranks and joins them. Each rank thread gets its own
/// MemoryLedger (LedgerScope) and an equal share of the calling thread's kernel threads,
/// max(1, num_threads() / n) (by default: of $OMP_NUM_THREADS, else the cores); its
/// default generator is left as a fresh thread's. If any rank throws, the group is
/// aborted (others fail with "aborted because rank k failed: ...") and the first
/// exception is rethrown here, once every rank returned: a rank stuck outside any
/// collective (its own code, I/O, a lock) never meets the abort, so when one has not
/// returned within the failing rank's timeout (at least 10 s) of the failure, it is named
/// with the failure on stderr and
/// the process ends (exit code 1), as MPI_Abort ends an MPI job. A rank whose thread cannot
/// be created (the machine's limit on threads or memory) aborts the ranks already started;
/// once they are joined the error names that rank.
void run_threads(int n, const std::function<void(Communicator&)>& fn);

}  // namespace zt::comm
