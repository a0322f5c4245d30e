// The one launch rule for apps: a plain start runs `--ranks N` thread ranks (ThreadComm);
// under mpirun each process is a rank, with MpiComm for CPU tensors and NcclComm for
// CUDA tensors.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <string>

#include "core/device.h"
#include "zero/comm/communicator.h"

namespace zt::comm {

/// True when started by mpirun/mpiexec (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK set).
bool under_mpirun();

/// How to start the ranks.
struct LaunchOptions {
  int ranks = 1;  ///< thread ranks for a plain start (--ranks)
  /// --ranks was given: under mpirun it must then equal the world size, 1 included (a
  /// value above 1 must whether given or not).
  bool ranks_given = false;
  Device device = Device::cpu();         ///< cuda: NCCL under mpirun, GPU = local rank
  std::chrono::milliseconds timeout{0};  ///< collective deadline; 0 keeps the default
  /// Bytes each rank may hold on each device (its ledger's limit); 0 keeps the default
  /// ($ZT_MEMORY_LIMIT, or none).
  int64_t memory_limit = 0;
};

/// Settles a failure before launch (a bad config or argument) across the processes of an
/// mpirun job: every process must call it, with the exception it caught or null. Returns
/// when none failed. Otherwise each process throws comm::AgreedError, which rank 0 alone
/// prints: the first failing rank's message, "rank R: " before it when rank 0 did not fail
/// the same way; so the job prints one error and every process ends normally. A plain
/// start rethrows `failure` itself.
void agree_before_launch(const std::exception_ptr& failure);

/// Under mpirun, read() runs on rank 0 alone and every process returns its text (or throws
/// zt::Error with its message where it threw): for a file that only rank 0 can read, such as
/// standard input, which mpirun gives rank 0 alone. Every process must call it. A plain start
/// returns read().
std::string read_on_rank0(const std::function<std::string()>& read);

/// After a rank's own code returned, on a communicator of one process per rank: a rank that
/// returned while the others still call collectives makes every rank fail at once, naming
/// it, where they would wait for the communicator's timeout. With MpiComm, a barrier that
/// its check compares with the others' collectives (nothing where the check is off: an
/// unchecked barrier could pair with another collective). With NcclComm, whose collectives
/// are not compared and do not block the host (a rank whose peer returned early returns
/// too, its collective queued), a compared gather of how many collectives each rank
/// issued: on a difference every rank throws, naming each rank's count. A rank blocked on
/// the host behind such a collective (a barrier, a copy to the host) never gets here: its
/// watchdog ends the job at the deadline. launch() calls it on every rank; a program that
/// makes its communicator itself calls it before destroying it.
void agree_at_return(Communicator& comm);

/// Runs fn(comm) on every rank. Plain start: run_threads(opts.ranks, fn) (first exception
/// rethrown). Under mpirun: fn runs once in this process; opts.ranks must be 1 or the
/// world size; an exception is rethrown with one rank and ends the job (after printing
/// it) with several, so peers never wait for a dead rank.
void launch(const LaunchOptions& opts, const std::function<void(Communicator&)>& fn);
/// launch({.ranks = ranks}, fn).
void launch(int ranks, const std::function<void(Communicator&)>& fn);

}  // namespace zt::comm
