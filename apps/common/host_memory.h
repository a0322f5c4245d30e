// Whether a run's host memory can hold what it is about to allocate, asked before it does:
// host allocations past the machine's memory end with the kernel killing the process
// (memory is overcommitted) or, at best, with the allocator's out-of-memory error after
// every byte the machine had was taken. Thread ranks of one process share the host's memory,
// and so do the processes on one host (by host name), whose ranks are added up here; the
// allocator, once the run allocates, holds each process to the machine on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/memory_plan.h"

namespace zt::app {

/// Errors on every rank when the ranks on some host would pass its memory
/// (host_memory_bytes()) by allocating `to_come` bytes each on the host beyond what the
/// process holds. `what` names those bytes in the error ("the GPT's f32 parameters").
/// Every rank calls it (one all-gather).
void check_host_fits(int64_t to_come, const std::string& what, comm::Communicator& comm);

/// Before `model` ("the GPT") of `elements` f32 parameters is built on `device`,
/// partitioned (each rank builds its ceil(elements / N) under zero::Init) or `replicated`
/// (whole on every rank): check_host_fits for those bytes on the CPU; nothing on a GPU,
/// whose allocations fail at once.
void check_host_can_build(int64_t elements, bool replicated, Device device,
                          comm::Communicator& comm, const std::string& model);

/// What a rank has still to allocate on the host for `plan`'s model states, gathered
/// parameters and replicas (a model on the CPU), or its offloaded optimizer (on a GPU),
/// beyond the host bytes it holds.
int64_t host_bytes_to_come(const zero::MemoryPlan& plan, Device device);

/// One rank's host memory as check_host_fits sees it.
struct HostNeed {
  uint64_t process;  ///< the same for ranks of one process (a hash of host name and pid)
  int64_t to_come;   ///< host bytes the rank is about to allocate
  int64_t held;      ///< host bytes its process holds (process_cpu_bytes())
  int64_t memory;    ///< the host's memory (host_memory_bytes()); 0: unknown
  char host[65];     ///< the host's name (gethostname; Linux allows 64 bytes)
};
/// "" when the ranks on every host can allocate their bytes to come within its memory
/// (each process's held bytes counted once), else check_host_fits's error for the first
/// host that cannot.
std::string host_fit_error(const std::vector<HostNeed>& ranks, const std::string& what);

}  // namespace zt::app
