// NcclComm: NCCL collectives on a private stream. Ordering: an event recorded on the
// caller's compute stream gates the collective; a second event after it lets wait()
// gate the compute stream in turn. Tensors are held by the Work until that second gate
// is queued on the stream that owns their memory, so the caching allocator cannot hand
// it out before the collective is done with it. The watchdog polls the second events.
#include "zero/comm/cuda/nccl_comm.h"

#include <cstdio>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "core/cuda/check.h"
#include "core/device.h"
#include "core/work_counts.h"
#include "zero/comm/executor.h"
#include "zero/comm/watchdog.h"

namespace zt::comm {

namespace internal {
void throw_nccl_error(const char* file, int line, const char* call, ncclResult_t rc) {
  ::zt::detail::throw_error(
      file, line,
      ::zt::detail::cat("NCCL error in ", call, ": ", ncclGetErrorString(rc), " (",
                        ncclGetLastError(nullptr),
                        "; HINT: rerun with NCCL_DEBUG=INFO, one GPU per process)"));
}
}  // namespace internal

namespace {
ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f16:
      return ncclFloat16;
    case DType::i64:
      return ncclInt64;
    case DType::i32:
      return ncclInt32;
    case DType::b8:
      return ncclUint8;
  }
  ZT_FAIL("NcclComm: unsupported dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
  }
  ZT_FAIL("NcclComm: unsupported reduce op");
}

int pick_device(MpiComm& boot, int device) {
  // cuda_available() first: without a GPU (or driver) cudaGetDeviceCount fails with a
  // driver-version error that suggests updating a driver that is not there.
  ZT_CHECK(cuda_available(), "NcclComm: rank ", boot.rank(),
           " sees no GPU (a GPU run under mpirun needs one per process); check nvidia-smi and "
           "CUDA_VISIBLE_DEVICES, or train on the CPU");
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device >= 0) {
    ZT_CHECK(device < count, "NcclComm: device ", device, " but only ", count, " visible");
    return device;
  }
  MPI_Comm local;
  int local_rank = 0;
  {
    MpiLock lock;
    MPI_CHECK(MPI_Comm_split_type(boot.handle(), MPI_COMM_TYPE_SHARED, boot.rank(), MPI_INFO_NULL,
                                  &local));
    MPI_CHECK(MPI_Comm_rank(local, &local_rank));
    MPI_CHECK(MPI_Comm_free(&local));
  }
  return local_rank % count;
}

// Makes `device` the thread's current device, before anything of the communicator touches
// the GPU: CUDA calls without a device guard (pinned host allocations, pointer queries)
// then make no context on GPU 0, nor does a guard that restores the previous device.
int make_current(int device) {
  CUDA_CHECK(cudaSetDevice(device));
  return device;
}

char* bytes_of(const Tensor& t) {
  return static_cast<char*>(t.data_ptr());
}
}  // namespace

/// A collective in flight on the NCCL stream. Each wait() orders the caller's current
/// stream (and, the first time, the stream the collective was issued from, which owns its
/// tensors' memory) after the collective and returns: the host does not block. Once that order is
/// queued the tensors can be let go, since the caching allocator reuses memory only in its owning
/// stream's order. The communicator's watchdog finds a collective that fails or never
/// finishes. A barrier is the exception: it promises the host that every rank arrived,
/// so its wait() blocks until the barrier's event completed.
class NcclWork : public Work {
 public:
  NcclWork(NcclComm* comm, std::string what, std::vector<Tensor> hold,
           std::shared_ptr<const cuda::Event> done, cudaStream_t issued_on, bool host_waits)
      : comm_(comm),
        what_(std::move(what)),
        hold_(std::move(hold)),
        done_(std::move(done)),
        issued_on_(issued_on),
        host_waits_(host_waits) {}
  ~NcclWork() override {
    try {  // keep later compute ordered after the collective even if never waited for
      if (!owner_ordered_) order_after();
    } catch (...) {
    }
  }

  void wait() override {
    check_healthy();
    order_after();
    if (!host_waits_ || done_->query()) return;
    ++::zt::detail::thread_work_counts().syncs;  // a host wait, counted as every one is
    for (int polls = 0; !done_->query(); ++polls) {
      check_healthy();  // the watchdog fails a late barrier: stop waiting for it then
      if (polls < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  bool test() override {
    cuda::DeviceGuard g(comm_->device_);  // events are queried on their own device
    return done_->query();
  }

 private:
  void check_healthy() const {
    std::string why = comm_->abort_reason();
    if (!why.empty()) throw AbortedError(detail::cat("zt.comm: ", what_, " aborted because ", why));
  }
  // Every stream that waits is ordered (a second waiter on another stream too); the owning
  // stream once, after which the tensors can be let go.
  void order_after() {
    cuda::DeviceGuard g(comm_->device_);
    cudaStream_t current = cuda::current_stream(comm_->device_);
    if (last_ordered_ != current) cuda::stream_wait_event(current, *done_);
    last_ordered_ = current;
    if (owner_ordered_) return;
    if (issued_on_ != current) cuda::stream_wait_event(issued_on_, *done_);
    owner_ordered_ = true;
    hold_.clear();
  }

  NcclComm* comm_;
  std::string what_;
  std::vector<Tensor> hold_;  // until the owning stream is ordered after the collective
  std::shared_ptr<const cuda::Event> done_;
  cudaStream_t issued_on_;
  bool host_waits_;
  bool owner_ordered_ = false;
  std::optional<cudaStream_t> last_ordered_;  // the stream the last wait() ordered
};

NcclComm::NcclComm(int device) : NcclComm(std::make_unique<MpiComm>(), device) {}

NcclComm::NcclComm(std::unique_ptr<MpiComm> boot, int device)
    : Communicator(boot->rank(), boot->size()),
      boot_(std::move(boot)),
      device_(make_current(pick_device(*boot_, device))),
      stream_(device_, /*non_blocking=*/true) {
  ncclUniqueId id;
  if (rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  std::string mine(rank() == 0 ? reinterpret_cast<const char*>(&id) : "",
                   rank() == 0 ? sizeof(id) : 0);
  std::string root_id = boot_->all_gather_bytes(mine)[0];  // has the MPI deadline
  ZT_CHECK(root_id.size() == sizeof(id), "NcclComm: bad unique id from rank 0");
  std::memcpy(&id, root_id.data(), sizeof(id));
  cuda::DeviceGuard g(device_);
  NCCL_CHECK(ncclCommInitRank(&nccl_, size(), id, rank()));
  try {  // a constructor that throws runs no destructor: the communicator goes here
    barrier_buf_ = Tensor::empty({1}, DType::i32, Device::cuda(device_));
    // One rank runs every collective in place (Communicator::issue): nothing to watch.
    if (size() > 1)
      watchdog_ =
          std::make_unique<Watchdog>([this] { return async_error(); },
                                     [this](const std::string& why) { watchdog_failed(why); });
  } catch (...) {
    ncclCommAbort(nccl_);
    throw;
  }
}

NcclComm::~NcclComm() {
  // Let the collectives in flight finish while the watchdog still runs: one the peers
  // never issue (a rank-0-only collective at the end of a run) would block a plain
  // synchronize for ever, silently; the watchdog ends the job naming it at its deadline.
  // Destroyed while an error unwinds (one every rank raised: ranks that disagree on their
  // steps, say), the job is stopping and what is in flight may never complete (the
  // disagreeing collectives): no wait, so that the error is printed now, not after the
  // timeout as the watchdog's.
  const bool unwinding = std::uncaught_exceptions() > 0;
  cudaError_t state = cudaSuccess;
  if (nccl_) {
    cuda::DeviceGuard g(device_);
    const Deadline deadline = deadline_after(unwinding ? std::chrono::milliseconds(0) : timeout());
    for (;;) {
      state = cudaStreamQuery(stream_.get());
      if (state != cudaErrorNotReady || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  watchdog_.reset();  // it polls nccl_
  if (!nccl_) return;
  cuda::DeviceGuard g(device_);
  // Destroy only a clean communicator; after an error (the stream's, or one NCCL reports
  // since the last collective completed) destroying can block, and NCCL asks for an abort.
  if (state == cudaSuccess && async_error().empty()) {
    ncclCommDestroy(nccl_);
    return;
  }
  if (state == cudaErrorNotReady && !unwinding)
    std::fprintf(stderr,
                 "zt.comm: rank %d: NCCL collectives still in flight after %lld ms when the "
                 "communicator was destroyed (a collective the other ranks did not issue?); "
                 "aborting it\n",
                 rank(), static_cast<long long>(timeout().count()));
  ncclCommAbort(nccl_);  // makes kernels stuck waiting for peers exit
}

void NcclComm::fail(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "abort()" : reason;
  if (nccl_) {
    ncclCommAbort(nccl_);  // makes kernels stuck waiting for peers exit
    nccl_ = nullptr;
  }
}

std::string NcclComm::async_error() const {
  std::lock_guard<std::mutex> lock(mu_);  // fail() may abort and clear nccl_ meanwhile
  ncclResult_t async = ncclSuccess;
  if (nccl_ && ncclCommGetAsyncError(nccl_, &async) == ncclSuccess && async != ncclSuccess)
    return detail::cat("NCCL reports ", ncclGetErrorString(async));
  return "";
}

void NcclComm::watchdog_failed(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_reason_.empty()) abort_reason_ = why;
  }
  // The peers are stuck in (or past) a collective that cannot finish, and the issuing
  // thread may be blocked behind it in any host wait: only ending the job frees them.
  // The NCCL communicator is left alone: the issuing thread may be using it right now.
  boot_->abort(why);  // prints the reason, then MPI_Abort (size() > 1 here)
}

void NcclComm::abort(const std::string& reason) {
  fail(reason);
  boot_->abort(reason);  // MPI_Abort with more than one rank
}

std::string NcclComm::abort_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_reason_;
}

std::shared_ptr<Work> NcclComm::submit(Request req) {
  check_healthy(req);
  // A captured collective's events cannot be polled by the watchdog (and zt does not
  // capture multi-rank steps: Engine::capture_blocker names it).
  ZT_CHECK(!graph_capturing(), "NcclComm: ", describe(req),
           " was issued inside a CUDA graph capture; multi-rank steps cannot be captured");
  if (req.kind == Collective::kAllGatherBytes) {  // small host objects go through MPI
    boot_->set_timeout(timeout());                // under this communicator's deadline
    *req.bytes_out = boot_->all_gather_bytes(*req.bytes_in, req.label);  // an agreement's too
    auto w = std::make_shared<CpuWork>();
    w->finish(nullptr);
    return w;
  }
  cuda::DeviceGuard g(device_);
  cudaStream_t compute = cuda::current_stream(device_);
  cuda::Event ready;
  ready.record(compute);
  cuda::stream_wait_event(stream_.get(), ready);
  try {
    launch(req);
  } catch (const std::exception& e) {
    // NCCL refused it on this rank (a lazy connection that could not be made, one send of a
    // group): the peers' collective pairs with nothing, and this rank's next one would pair
    // with it. The communicator is failed, so that every later call says why.
    fail(detail::cat(describe(req), " failed on this rank as it was launched: ", e.what()));
    throw;
  }
  auto done = std::make_shared<cuda::Event>();
  done->record(stream_.get());
  std::string what = describe(req);
  if (watchdog_)
    watchdog_->watch(what, timeout(), [done, dev = device_] {
      cuda::DeviceGuard g(dev);  // the watchdog thread's current device is its own
      return done->query();
    });
  std::vector<Tensor> hold;
  for (const Tensor* t : {&req.in, &req.out})
    if (t->defined()) hold.push_back(*t);
  return std::make_shared<NcclWork>(this, std::move(what), std::move(hold), std::move(done),
                                    compute, req.kind == Collective::kBarrier);
}

void NcclComm::launch(const Request& req) {
  cudaStream_t s = stream_.get();
  const int r = rank();
  switch (req.kind) {
    case Collective::kAllGather:
      NCCL_CHECK(ncclAllGather(req.in.data_ptr(), req.out.data_ptr(), req.in.numel(),
                               nccl_type(req.in.dtype()), nccl_, s));
      return;
    case Collective::kReduceScatter:
      NCCL_CHECK(ncclReduceScatter(req.in.data_ptr(), req.out.data_ptr(), req.out.numel(),
                                   nccl_type(req.in.dtype()), nccl_op(req.op), nccl_, s));
      return;
    case Collective::kAllReduce:
      NCCL_CHECK(ncclAllReduce(req.out.data_ptr(), req.out.data_ptr(), req.out.numel(),
                               nccl_type(req.out.dtype()), nccl_op(req.op), nccl_, s));
      return;
    case Collective::kBroadcast:
      NCCL_CHECK(ncclBroadcast(req.out.data_ptr(), req.out.data_ptr(), req.out.numel(),
                               nccl_type(req.out.dtype()), req.root, nccl_, s));
      return;
    case Collective::kScatter: {  // NCCL has no scatter: grouped point-to-point
      const int64_t n = req.out.numel();
      const size_t bytes = static_cast<size_t>(n) * dtype_size(req.out.dtype());
      const ncclDataType_t t = nccl_type(req.out.dtype());
      NCCL_CHECK(ncclGroupStart());
      try {
        if (r == req.root) {
          for (int j = 0; j < size(); ++j)
            if (j != r) NCCL_CHECK(ncclSend(bytes_of(req.in) + j * bytes, n, t, j, nccl_, s));
        } else {
          NCCL_CHECK(ncclRecv(req.out.data_ptr(), n, t, req.root, nccl_, s));
        }
      } catch (...) {
        // Close the group: left open, NCCL would queue this thread's later calls into a
        // group that never launches.
        (void)ncclGroupEnd();
        throw;
      }
      NCCL_CHECK(ncclGroupEnd());
      if (r == req.root && bytes_of(req.out) != bytes_of(req.in) + r * bytes)
        CUDA_CHECK(cudaMemcpyAsync(req.out.data_ptr(), bytes_of(req.in) + r * bytes, bytes,
                                   cudaMemcpyDeviceToDevice, s));
      return;
    }
    case Collective::kBarrier:
      NCCL_CHECK(ncclAllReduce(barrier_buf_.data_ptr(), barrier_buf_.data_ptr(), 1, ncclInt32,
                               ncclSum, nccl_, s));
      return;
    case Collective::kAllGatherBytes:
      return;  // handled in submit
  }
}

}  // namespace zt::comm
