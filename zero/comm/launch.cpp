// launch(): picks the backend from the environment. NcclComm is only compiled with CUDA
// (ZT_WITH_CUDA, set by zt_core).
#include "zero/comm/launch.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cpu/blas.h"
#include "zero/comm/mpi_comm.h"
#include "zero/comm/thread_comm.h"
#ifdef ZT_WITH_CUDA
#include "zero/comm/cuda/nccl_comm.h"
#endif

namespace zt::comm {

// The variable that makes this process one of an MPI job's, or null.
static const char* mpi_job_variable() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return v;
  return nullptr;
}

bool under_mpirun() {
  return mpi_job_variable() != nullptr;
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
// Runs start() under mpirun: every failure past MPI's start ends the job, since a rank that
// returned from main would wait in MPI_Finalize for the others, which wait for it in their
// first collective. Without a shared job (one process, or MPI never started) it rethrows
// for the caller to report.
template <typename Start>
auto at_startup(Start start) {
  try {
    return start();
  } catch (...) {
    abort_job_if_shared(
        detail::cat("it failed at start-up: ", message_of(std::current_exception())));
    throw;
  }
}

}  // namespace

void agree_before_launch(const std::exception_ptr& failure) {
  if (!under_mpirun()) {
    if (failure) std::rethrow_exception(failure);
    return;
  }
  // A communicator of its own (the collective check and the deadline included); launch
  // makes the one the run uses.
  const auto comm = at_startup([] { return std::make_unique<MpiComm>(); });
  // A failure goes as '!' and its message, so that one whose message is empty still counts.
  const std::vector<std::string> all =
      comm->all_gather_bytes(failure ? "!" + message_of(failure) : std::string());
  const auto first = std::find_if(all.begin(), all.end(), [](const auto& m) { return !m.empty(); });
  if (first == all.end()) return;  // nobody failed
  const int r = static_cast<int>(first - all.begin());
  const std::string what = first->size() > 1 ? first->substr(1) : "an error without a message";
  throw AgreedError(all[0] == *first ? what : detail::cat("rank ", r, ": ", what), comm->rank());
}

std::string read_on_rank0(const std::function<std::string()>& read) {
  if (!under_mpirun()) return read();
  const auto comm = at_startup([] { return std::make_unique<MpiComm>(); });
  std::string mine;  // rank 0's: '+' and the text, or '!' and why it could not be read
  if (comm->rank() == 0) {
    try {
      mine = "+" + read();
    } catch (...) {
      mine = "!" + message_of(std::current_exception());
    }
  }
  const std::string first = comm->all_gather_bytes(mine)[0];
  if (first[0] == '!') throw Error(first.substr(1));
  return first.substr(1);
}

void agree_at_return(Communicator& comm) {
  if (comm.size() == 1) return;
  // A rank that returns while the others still call collectives would leave them waiting
  // until the timeout. With MpiComm, its last collective, checked against theirs, makes
  // every rank fail at once naming it; where all returned, a barrier (only with its check
  // on: unchecked, it could pair with another one).
  const auto* mpi = dynamic_cast<const MpiComm*>(&comm);
  if (mpi && !mpi->checks_collectives()) return;
  CollectiveLabel label("the end of the rank's function: it returned");
  if (mpi) {
    comm.barrier();
    return;
  }
  // NcclComm compares no collective, and its host does not wait for them: a rank whose
  // peer returned has its own function return too, with a collective queued that can
  // never finish. Its gathers of host objects are compared (they go through its MPI
  // bootstrap), so the ranks compare how many collectives each issued.
  const int64_t mine = comm.issued();
  const std::vector<int64_t> all = comm.all_gather_object<int64_t>(mine);
  if (std::all_of(all.begin(), all.end(), [&](int64_t k) { return k == all[0]; })) return;
  std::string counts;
  for (size_t j = 0; j < all.size(); ++j)
    counts += detail::cat(j > 0 ? ", " : "", "rank ", j, " issued ", all[j],
                          all[j] == 1 ? " collective" : " collectives");
  ZT_FAIL(
      "zt.comm: the ranks returned from their function after different numbers of collectives: ",
      counts,
      " (a rank returned while the others still called collectives, which can never "
      "finish: did the ranks take different code paths, such as a data-dependent branch?)");
}

void launch(const LaunchOptions& opts, const std::function<void(Communicator&)>& fn) {
  // Before any rank's thread starts: the choice may set OPENBLAS_CORETYPE (setenv), which no
  // other thread may read meanwhile.
  cpu::use_cpu_blas_kernels();
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
  const std::unique_ptr<Communicator> comm = at_startup([&] { return make_process_comm(opts); });
  // Every rank sees the same --ranks and world size, so all raise this together: an error
  // they agree on (printed once, by rank 0; each process ends normally, no abort).
  if ((opts.ranks > 1 || opts.ranks_given) && opts.ranks != comm->size())
    throw AgreedError(
        detail::cat("launch: --ranks ", opts.ranks, " conflicts with the ", comm->size(),
                    " processes of mpirun (under mpirun each process is one rank; "
                    "drop --ranks). This process counts as one of an MPI job because ",
                    mpi_job_variable(),
                    " is set; where no mpirun started it (a shell inside a Slurm job, say), "
                    "unset that variable for thread ranks"),
        comm->rank());
  at_startup([&] {
    apply(*comm);
    return true;
  });
  try {
    fn(*comm);
    agree_at_return(*comm);  // before its queue closes below
    // A collective that failed after its Work was dropped unwaited: its error, not exit 0.
    if (const std::exception_ptr lost = comm->finish_queued())
      ZT_FAIL("rank ", comm->rank(), ": ", message_of(lost), kUnwaitedWorkHint);
  } catch (const AgreedError&) {
    throw;         // every rank raises it: each ends normally (MPI_Finalize meets them all)
  } catch (...) {  // anything else, std::exception or not, ends the whole job
    if (comm->size() == 1) throw;
    comm->abort(
        detail::cat("rank ", comm->rank(), " failed: ", message_of(std::current_exception())));
    throw;  // not reached: abort ends the job
  }
}

void launch(int ranks, const std::function<void(Communicator&)>& fn) {
  LaunchOptions o;
  o.ranks = ranks;
  launch(o, fn);
}

}  // namespace zt::comm
