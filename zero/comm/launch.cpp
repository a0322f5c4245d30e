// launch(): picks the backend from the environment. NcclComm is only compiled with CUDA
// (ZT_WITH_CUDA, set by zt_core).
#include "zero/comm/launch.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "zero/comm/mpi_comm.h"
#include "zero/comm/thread_comm.h"
#ifdef ZT_WITH_CUDA
#include "zero/comm/cuda/nccl_comm.h"
#endif

namespace zt::comm {

bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

static std::unique_ptr<Communicator> make_process_comm(const LaunchOptions& opts) {
  if (opts.device.is_cuda()) {
#ifdef ZT_WITH_CUDA
    return std::make_unique<NcclComm>(-1);  // one GPU per process, by local rank
#else
    ZT_FAIL("launch: device ", opts.device.str(), " needs NCCL; rebuild with -DZT_CUDA=ON");
#endif
  }
  return std::make_unique<MpiComm>();
}

namespace {
// The message of an exception_ptr ("" when null).
std::string message_of(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown error";
  }
}
}  // namespace

void agree_before_launch(const std::exception_ptr& failure) {
  if (!under_mpirun()) {
    if (failure) std::rethrow_exception(failure);
    return;
  }
  mpi_init();
  int n = 1, rank = 0;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  const std::string mine = message_of(failure);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(n), displs(n);
  MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD));
  int total = 0;
  for (int j = 0; j < n; ++j) {
    displs[j] = total;
    total += lens[j];
  }
  if (total == 0) return;  // nobody failed
  std::string all(static_cast<size_t>(total), '\0');
  MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                           MPI_CHAR, MPI_COMM_WORLD));
  int first = 0;
  while (lens[first] == 0) ++first;
  const std::string msg = all.substr(displs[first], lens[first]);
  const bool as_rank0 = lens[0] > 0 && all.substr(0, lens[0]) == msg;
  throw AgreedError(as_rank0 ? msg : detail::cat("rank ", first, ": ", msg), rank);
}

void launch(const LaunchOptions& opts, const std::function<void(Communicator&)>& fn) {
  auto apply = [&](Communicator& c) {
    if (opts.timeout.count() > 0) c.set_timeout(opts.timeout);
    MemoryLedger& ledger = *current_ledger();  // the rank's own (thread ranks) or the process's
    ledger.set_label(detail::cat("rank ", c.rank()));
    if (opts.memory_limit > 0) {
      ledger.set_limit(Device::cpu(), opts.memory_limit);
      // The rank's GPU: NCCL's, or in a plain start the one the options name (a thread
      // rank's communicator itself works in host memory).
      const Device gpu = !c.device().is_cpu() ? c.device() : opts.device;
      if (gpu.is_cuda()) ledger.set_limit(Device::cuda(std::max(gpu.index, 0)), opts.memory_limit);
    }
  };
  if (!under_mpirun()) {
    run_threads(opts.ranks, [&](Communicator& c) {
      apply(c);
      fn(c);
    });
    return;
  }
  // Every failure past MPI's start ends the job: a rank that returned from main would wait
  // in MPI_Finalize for the others, which wait for it in their first collective.
  std::unique_ptr<Communicator> comm;
  try {
    comm = make_process_comm(opts);
    ZT_CHECK(opts.ranks <= 1 || opts.ranks == comm->size(), "launch: --ranks ", opts.ranks,
             " conflicts with the ", comm->size(),
             " processes of mpirun (under mpirun each process is one rank; drop --ranks)");
    apply(*comm);
  } catch (const std::exception& e) {
    abort_job_if_shared(detail::cat("it failed at start-up: ", e.what()));
    throw;  // one process (or MPI never started): the caller reports it
  }
  try {
    fn(*comm);
  } catch (const AgreedError&) {
    throw;  // every rank raises it: each ends normally (MPI_Finalize meets them all)
  } catch (const std::exception& e) {
    if (comm->size() == 1) throw;
    comm->abort(detail::cat("rank ", comm->rank(), " failed: ", e.what()));
    throw;  // not reached: abort ends the job
  }
}

void launch(int ranks, const std::function<void(Communicator&)>& fn) {
  LaunchOptions o;
  o.ranks = ranks;
  launch(o, fn);
}

}  // namespace zt::comm
