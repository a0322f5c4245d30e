// MpiComm: MPI's runtime, errors, and the waiting and checking every collective shares;
// the collectives themselves are in mpi_collectives.cpp. Every collective is nonblocking
// MPI polled on the communication thread. Each is preceded by a 16-byte all-reduce that
// checks every rank issued the same one (set_check_collectives), once per collective
// whatever the number of MPI calls it takes. The check's bytes are not counted.
//
// A wait that gives up (a timeout, an abort, an MPI error) leaves its MPI request pending:
// MPI cannot cancel a collective. Every buffer a request uses, the caller's tensors
// included, is held by the collective's Call (MpiComm::Held, never the stack), and a
// request left pending keeps it (abandoned_) until it completes, when a late peer arrives
// and MPI makes progress; a new tensor never receives that peer's data.
#include "zero/comm/mpi_comm.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

namespace zt::comm {

namespace internal {
std::string mpi_error_text(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MpiLock lock;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) len = 0;
  return std::string(buf, static_cast<size_t>(len));
}

void throw_mpi_error(const char* file, int line, const char* call, int rc) {
  ::zt::detail::throw_error(file, line,
                            ::zt::detail::cat("MPI error in ", call, ": ", mpi_error_text(rc)));
}
}  // namespace internal

namespace {
struct MpiRuntime {
  bool owned = false;
  int provided = MPI_THREAD_SINGLE;
  // Serializes calls when provided < MPI_THREAD_MULTIPLE; recursive, as an MPI_CHECK under
  // the lock asks MPI for the error's text under it again.
  std::recursive_mutex mu;
  ~MpiRuntime() {
    int fin = 0;
    if (owned && MPI_Finalized(&fin) == MPI_SUCCESS && !fin) MPI_Finalize();
  }
};
MpiRuntime& runtime() {
  static MpiRuntime rt;
  return rt;
}

// The job size the launcher gave this process must be MPI's. A launcher of another MPI
// (MPICH's mpiexec, say, for a zt built with Open MPI) starts processes that each
// initialize zt's MPI as a world of their own: N copies of a one-rank run, each training
// alone and writing the same files. Open MPI's mpirun names the size in
// OMPI_COMM_WORLD_SIZE, MPICH's and Intel's mpiexec and Slurm's srun in PMI_SIZE; the first
// set is read (an Open MPI job started from a Slurm step sees both, the step's PMI_SIZE 1).
void check_launcher_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(var);
    if (value == nullptr) continue;
    char* end = nullptr;
    const long announced = std::strtol(value, &end, 10);
    if (end == value || *end != '\0') return;  // not a size: nothing to compare
    int world = 0;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    if (announced == world) return;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(version, &len) != MPI_SUCCESS) len = 0;
    std::string library(version, static_cast<size_t>(len));
    library = library.substr(0, library.find_first_of(",\n"));
    ZT_FAIL("zt.comm: the launcher started this process as one of ", announced, " (", var, "=",
            value, ") but MPI_COMM_WORLD has ", world, world == 1 ? " process" : " processes",
            ": the launcher (mpirun, mpiexec or srun) belongs to another MPI than the one zt "
            "was built with (",
            library.empty() ? "see the build's MPI" : library,
            "); start the job with that MPI's mpirun, or unset ", var,
            " where no launcher started the process");
  }
}

}  // namespace

void mpi_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    MpiRuntime& rt = runtime();
    int init = 0;
    MPI_CHECK(MPI_Initialized(&init));
    if (!init) {
      MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &rt.provided));
      rt.owned = true;
      // Errors come back to zt, which names the collective, instead of ending the job
      // inside MPI (MPI_ERRORS_ARE_FATAL). OpenMPI raises a failed request's error on the
      // world communicator, so that one's handler too (a program that initialized MPI
      // itself keeps its own).
      MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    } else {
      MPI_CHECK(MPI_Query_thread(&rt.provided));
    }
    ZT_CHECK(rt.provided >= MPI_THREAD_SERIALIZED, "MPI provides thread level ", rt.provided,
             "; zt needs MPI_THREAD_SERIALIZED or better (collectives run on a comm thread)");
    check_launcher_size();
  });
}

void abort_job_if_shared(const std::string& reason) {
  int init = 0, fin = 0, n = 1, rank = 0;
  if (MPI_Initialized(&init) != MPI_SUCCESS || !init) return;
  if (MPI_Finalized(&fin) != MPI_SUCCESS || fin) return;
  MpiLock lock;  // the communication thread may be polling a collective
  if (MPI_Comm_size(MPI_COMM_WORLD, &n) != MPI_SUCCESS || n <= 1) return;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "zt.comm: rank %d aborts the MPI job: %s\n", rank, reason.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

MpiLock::MpiLock() {
  if (runtime().provided < MPI_THREAD_MULTIPLE) {
    runtime().mu.lock();
    locked_ = true;
  }
}

MpiLock::~MpiLock() {
  if (locked_) runtime().mu.unlock();
}

// A duplicate of MPI_COMM_WORLD, made under the communicator's deadline: a rank that never
// makes it (one that failed before, and waits in MPI_Finalize for the others) is an error
// at the deadline, where MPI_Comm_dup would wait for ever. A duplication given up on stays
// pending, so its handle is kept for the life of the process (MPI may still write it).
static MPI_Comm dup_world(std::chrono::milliseconds timeout) {
  const Deadline deadline = deadline_after(timeout);
  auto c = std::make_unique<MPI_Comm>(MPI_COMM_NULL);
  MPI_Request rq = MPI_REQUEST_NULL;
  {
    MpiLock lock;
    MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, c.get(), &rq));
  }
  for (int polls = 0;; ++polls) {
    int done = 0;
    {
      MpiLock lock;
      MPI_CHECK(MPI_Test(&rq, &done, MPI_STATUS_IGNORE));
    }
    if (done) break;
    if (std::chrono::steady_clock::now() > deadline) {
      c.release();  // still pending
      ZT_FAIL("zt.comm: making a communicator (MPI_Comm_idup of MPI_COMM_WORLD) timed out after ",
              timeout.count(),
              " ms ($ZT_COMM_TIMEOUT_MS): a rank did not make its own. Every process makes its "
              "communicators in the same order; did a rank stop or fail before it (see its "
              "output above)?");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 64 ? 20 : 1000));
  }
  MpiLock lock;
  MPI_CHECK(MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN));  // as the world's (mpi_init)
  return *c;
}

// MPI_COMM_WORLD's rank and size, MPI started first (either may be asked first).
static int world_rank() {
  mpi_init();
  int r = 0;
  MpiLock lock;  // another communicator's thread may be polling a collective
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
  return r;
}

static int world_size() {
  mpi_init();
  int n = 0;
  MpiLock lock;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
  return n;
}

// A duplicate's rank and size are the world's; it is made under this communicator's
// timeout ($ZT_COMM_TIMEOUT_MS).
MpiComm::MpiComm() : Communicator(world_rank(), world_size()), comm_(dup_world(timeout())) {
  exec_ = std::make_unique<Executor>();
}

MpiComm::~MpiComm() {
  exec_.reset();
  release_abandoned();
  if (!leaked_) {
    MpiLock lock;
    MPI_Comm_free(&comm_);
  }
}

std::exception_ptr MpiComm::finish_queued() {
  return exec_->finish();
}

void MpiComm::fail(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "abort()" : reason;
}

void MpiComm::abort(const std::string& reason) {
  fail(reason);
  abort_job_if_shared(reason);
}

std::string MpiComm::abort_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_reason_;
}

std::shared_ptr<Work> MpiComm::submit(Request req) {
  // The check and the chunk limit as they stand when the collective is issued (not when the
  // communication thread gets to it): a rank that switches the check off with work queued
  // must not skip the check's collective for work another rank checks.
  const bool check = check_.load(std::memory_order_relaxed);
  const int64_t limit = limit_.load(std::memory_order_relaxed);
  return exec_->submit([this, req = std::move(req), check, limit] { execute(req, check, limit); });
}

void MpiComm::fail_call(const std::string& what, const char* call, int rc) {
  leaked_ = true;
  // Only a message longer than its receive buffer says the ranks disagreed; other codes
  // are MPI's own failures (a transport, a dead peer).
  int cls = rc;
  {
    MpiLock lock;
    MPI_Error_class(rc, &cls);
  }
  const bool mismatch = cls == MPI_ERR_TRUNCATE || cls == MPI_ERR_COUNT;
  const std::string msg = ::zt::detail::cat(
      "zt.comm: ", what, ": ", call, " failed: ", internal::mpi_error_text(rc),
      mismatch ? " (the ranks issued different collectives, or this one with other sizes: "
                 "each rank's output above names the collective it ran)"
               : "");
  fail(msg);
  ZT_FAIL(msg);
}

void MpiComm::abandon(MPI_Request req, const Call& call) {
  leaked_ = true;
  if (req != MPI_REQUEST_NULL) abandoned_.push_back({req, call.held});
}

namespace {
// The abandoned requests still pending when their communicator went, with their memory:
// MPI may write into it until MPI_Finalize, so it is never freed (reachable, not lost).
std::mutex& pending_mu() {
  static auto* mu = new std::mutex();  // usable by a communicator destroyed at exit
  return *mu;
}
std::vector<std::shared_ptr<const void>>& pending_for_ever() {
  static auto* kept = new std::vector<std::shared_ptr<const void>>();
  return *kept;
}
}  // namespace

void MpiComm::release_abandoned() {
  if (abandoned_.empty()) return;
  int fin = 0;
  if (MPI_Finalized(&fin) == MPI_SUCCESS && fin) {  // MPI touches no buffer any more
    abandoned_.clear();
    return;
  }
  MpiLock lock;
  for (Abandoned& a : abandoned_) {
    int done = 0;
    // An error completes the request too, when MPI freed it (MPI_REQUEST_NULL).
    MPI_Test(&a.request, &done, MPI_STATUS_IGNORE);
    if (done || a.request == MPI_REQUEST_NULL) continue;
    std::lock_guard<std::mutex> kept(pending_mu());
    pending_for_ever().push_back(std::move(a.held));
  }
  abandoned_.clear();
}

void MpiComm::wait_request(MPI_Request* req, const Call& call) {
  const std::string& what = call.what;
  for (int polls = 0;; ++polls) {
    int done = 0, rc = MPI_SUCCESS;
    {
      MpiLock lock;
      rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) {
      abandon(*req, call);
      fail_call(what, "MPI_Test", rc);
    }
    if (done) return;
    std::string why = abort_reason();
    if (!why.empty()) {
      abandon(*req, call);
      throw AbortedError(::zt::detail::cat("zt.comm: ", what, " aborted because ", why));
    }
    if (std::chrono::steady_clock::now() > call.deadline) {
      abandon(*req, call);
      std::string msg = ::zt::detail::cat(
          "zt.comm: ", what, " timed out after ", call.timeout.count(),
          " ms (see Communicator::set_timeout); MPI cannot tell which ranks did not arrive: a "
          "rank may be stuck, stopped or dead (see its output above), or the ranks issue "
          "different collectives or a different order of them");
      fail(msg);
      ZT_FAIL(msg);
    }
    // Spin briefly for latency, then back off so oversubscribed ranks can run.
    if (polls < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 20 : 200));
    }
  }
}

void MpiComm::set_chunk_limit(int64_t elements) {
  ZT_CHECK(elements >= 1 && elements <= INT_MAX, "MpiComm::set_chunk_limit: ", elements,
           " elements; the limit must be in [1, INT_MAX]");
  limit_.store(elements, std::memory_order_relaxed);
}

void MpiComm::execute(const Request& req, bool check, int64_t limit) {
  check_healthy(req);
  const std::chrono::milliseconds wait = timeout();
  const Call call{describe(req), wait, deadline_after(wait), limit, std::make_shared<Held>()};
  call.held->tensors = {req.out, req.in};
  try {
    run(req, call, check);
  } catch (...) {
    // MPI's failures (and a timeout) failed the communicator already, and fail() keeps the
    // first reason. One of this rank's own, once the others may be inside the collective:
    // their calls are still pending, and would be paired with this rank's next ones.
    if (call.started) {
      leaked_ = true;  // the others' calls may still reference comm_
      fail(::zt::detail::cat("the communicator is unusable since ", call.what,
                             " failed on this rank after its MPI calls began (the other ranks "
                             "may still be inside it): ",
                             message_of(std::current_exception())));
    }
    throw;
  }
}

void MpiComm::run(const Request& req, const Call& call, bool check) {
  // The scratch first: a rank whose memory limit refuses it has made no MPI call of this
  // collective, the check's neither, so it may go on (ThreadComm's ranks make theirs before
  // they post, too): where every rank failed alike they retry together, and a rank that
  // failed alone meets the others' check with its next collective.
  const Tensor scratch = scratch_for(req, call.limit);
  if (scratch.defined()) call.held->tensors.push_back(scratch);
  if (size() > 1 && check) check_signatures(req, call);
  switch (req.kind) {
    case Collective::kAllGather:
      return all_gather_chunks(req, call);
    case Collective::kReduceScatter:
      return reduce_scatter_chunks(req, call, scratch);
    case Collective::kAllReduce:
      return all_reduce_chunks(req, call, scratch);
    case Collective::kBroadcast:
      return broadcast_chunks(req, call);
    case Collective::kScatter:
      return scatter_chunks(req, call);
    case Collective::kBarrier:
      return start_and_wait(call, "MPI_Ibarrier",
                            [&](MPI_Request* rq) { return MPI_Ibarrier(comm_, rq); });
    case Collective::kAllGatherBytes:
      *req.bytes_out = gather_bytes(req.bytes_in, call);
      return;
  }
}

void MpiComm::start_and_wait(const Call& call, const char* name,
                             const std::function<int(MPI_Request*)>& start) {
  MPI_Request rq = MPI_REQUEST_NULL;
  call.started = true;
  {
    MpiLock lock;
    const int rc = start(&rq);
    if (rc != MPI_SUCCESS) fail_call(call.what, name, rc);
  }
  wait_request(&rq, call);
}

namespace {
// FNV-1a: the same hash in every process, whatever its standard library.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);  // the byte's bits: a char may be signed
    h *= 1099511628211ull;
  }
  return h;
}
}  // namespace

void MpiComm::check_signatures(const Request& req, const Call& call) {
  const std::string sig = signature(req);
  const uint64_t h = fnv1a(sig);
  // The maxima of h and ~h: every rank's h is the same iff max h == ~max ~h (= min h).
  std::array<uint64_t, 2>& v = call.held->hold(std::array<uint64_t, 2>{h, ~h});
  start_and_wait(call, "MPI_Iallreduce", [&](MPI_Request* rq) {
    return MPI_Iallreduce(MPI_IN_PLACE, v.data(), 2, MPI_UINT64_T, MPI_MAX, comm_, rq);
  });
  if (v[0] == ~v[1]) return;
  // Every rank is here.
  const std::vector<std::string> sigs =
      gather_bytes(std::make_shared<const std::string>(sig), call);
  std::string sides;
  for (size_t j = 0; j < sigs.size(); ++j)
    sides += ::zt::detail::cat(j > 0 ? ", " : "", "rank ", j, " called ", sigs[j]);
  const std::string msg = mismatch_message(req.seq, sides);
  fail(msg);
  ZT_FAIL(msg);
}

}  // namespace zt::comm
