// An issued collective (Work) and the errors a collective raises: AbortedError when its
// communicator was aborted, AgreedError for an error every rank raises together.
#pragma once

#include <string>

#include "core/error.h"

namespace zt::comm {

/// Thrown by a collective that cannot run because its communicator was aborted by an
/// earlier failure, whose message it quotes ("... aborted because rank 0 failed: ...").
class AbortedError : public Error {
 public:
  using Error::Error;
};

/// An error every rank raises at the same point, after a collective told each of them
/// (a check that compared the ranks' configs, say). launch() lets it end every process
/// normally, where another error aborts the MPI job, and a program prints it once.
class AgreedError : public Error {
 public:
  AgreedError(const std::string& what, int rank) : Error(what), rank_(rank) {}
  /// The rank that raised this copy.
  int rank() const { return rank_; }

 private:
  int rank_;
};

/// An issued collective. Per communicator, work completes in issue order. A Work keeps
/// its tensors alive until it finished (CPU backends) or until the compute stream is
/// ordered after it (NCCL); it must not outlive its communicator.
class Work {
 public:
  virtual ~Work() = default;
  /// CPU tensors: blocks until the collective finished; throws zt::Error if it failed or
  /// timed out. CUDA tensors (NcclComm): orders the caller's stream after the collective
  /// and returns at once (no host wait); a failure or timeout is found by the
  /// communicator's watchdog, which ends the job. Either way, outputs may be read (and
  /// inputs reused) by work issued after wait() returned.
  virtual void wait() = 0;
  /// True once the collective finished or failed (wait() then returns or throws at once).
  virtual bool test() = 0;
};

}  // namespace zt::comm
