// NcclComm: NCCL collectives on a private stream. Ordering: an event recorded on the
// caller's compute stream gates the collective; a second event after it lets wait()
// gate the compute stream in turn. Tensors are held by the Work until the collective is
// known finished, so the caching allocator cannot hand their memory out too early.
#include "zero/comm/cuda/nccl_comm.h"

#include <thread>
#include <vector>

#include "core/cuda/check.h"
#include "core/work_counts.h"
#include "zero/comm/executor.h"

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
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  ZT_CHECK(count > 0, "NcclComm: no CUDA device visible");
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

char* bytes_of(const Tensor& t) {
  return static_cast<char*>(t.data_ptr());
}
}  // namespace

/// A collective in flight on the NCCL stream.
class NcclWork : public Work {
 public:
  NcclWork(NcclComm* comm, std::string what, std::vector<Tensor> hold, cuda::Event done)
      : comm_(comm), what_(std::move(what)), hold_(std::move(hold)), done_(std::move(done)) {}
  ~NcclWork() override {
    if (!finished_) {
      try {  // keep later compute ordered after the collective even if never waited for
        cuda::DeviceGuard g(comm_->device_);
        cuda::stream_wait_event(cuda::current_stream(comm_->device_), done_);
      } catch (...) {
      }
    }
  }

  void wait() override {
    if (finished_) return;
    cuda::DeviceGuard g(comm_->device_);
    cuda::stream_wait_event(cuda::current_stream(comm_->device_), done_);
    const Deadline deadline = std::chrono::steady_clock::now() + comm_->timeout();
    // The host polls the event until the collective is done (its deadline and NCCL's
    // asynchronous errors are checked here): a host wait, counted as one.
    if (!done_.query()) ++::zt::detail::thread_work_counts().syncs;
    for (int polls = 0; !done_.query(); ++polls) {
      ncclResult_t async = ncclSuccess;
      if (comm_->nccl_) NCCL_CHECK(ncclCommGetAsyncError(comm_->nccl_, &async));
      if (async != ncclSuccess) {
        std::string msg =
            detail::cat("zt.comm: ", what_, " failed in NCCL: ", ncclGetErrorString(async));
        comm_->fail(msg);
        ZT_FAIL(msg);
      }
      std::string why = comm_->abort_reason();
      if (!why.empty())
        throw AbortedError(detail::cat("zt.comm: ", what_, " aborted because ", why));
      if (std::chrono::steady_clock::now() > deadline) {
        std::string msg =
            detail::cat("zt.comm: ", what_, " timed out after ", comm_->timeout().count(),
                        " ms (see Communicator::set_timeout); NCCL cannot tell which ranks did not "
                        "arrive; the NCCL communicator was aborted");
        comm_->fail(msg);
        ZT_FAIL(msg);
      }
      if (polls < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    finished_ = true;
    hold_.clear();
  }

  bool test() override { return finished_ || done_.query(); }

 private:
  NcclComm* comm_;
  std::string what_;
  std::vector<Tensor> hold_;
  cuda::Event done_;
  bool finished_ = false;
};

NcclComm::NcclComm(int device) : NcclComm(std::make_unique<MpiComm>(), device) {}

NcclComm::NcclComm(std::unique_ptr<MpiComm> boot, int device)
    : Communicator(boot->rank(), boot->size()),
      boot_(std::move(boot)),
      device_(pick_device(*boot_, device)),
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
  barrier_buf_ = Tensor::empty({1}, DType::i32, Device::cuda(device_));
}

NcclComm::~NcclComm() {
  if (nccl_) {
    cuda::DeviceGuard g(device_);
    cudaStreamSynchronize(stream_.get());
    ncclCommDestroy(nccl_);
  }
}

void NcclComm::fail(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "abort()" : reason;
  if (nccl_) {
    ncclCommAbort(nccl_);  // makes kernels stuck waiting for peers exit
    nccl_ = nullptr;
  }
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
  if (req.kind == Collective::kAllGatherBytes) {  // small host objects go through MPI
    *req.bytes_out = boot_->all_gather_bytes(*req.bytes_in);
    auto w = std::make_shared<CpuWork>();
    w->finish(nullptr);
    return w;
  }
  cuda::DeviceGuard g(device_);
  cuda::Event ready;
  ready.record(cuda::current_stream(device_));
  cuda::stream_wait_event(stream_.get(), ready);
  launch(req);
  cuda::Event done;
  done.record(stream_.get());
  std::vector<Tensor> hold;
  for (const Tensor* t : {&req.in, &req.out})
    if (t->defined()) hold.push_back(*t);
  auto w = std::make_shared<NcclWork>(this, describe(req), std::move(hold), std::move(done));
  return w;
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
      if (r == req.root) {
        for (int j = 0; j < size(); ++j)
          if (j != r) NCCL_CHECK(ncclSend(bytes_of(req.in) + j * bytes, n, t, j, nccl_, s));
      } else {
        NCCL_CHECK(ncclRecv(req.out.data_ptr(), n, t, req.root, nccl_, s));
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
