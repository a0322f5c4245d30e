// NcclComm: CUDA tensors, one process per GPU under mpirun. The NCCL communicator is
// bootstrapped through MPI (rank 0's unique id), collectives run on the communicator's
// own stream, ordered after the caller's compute stream with an event. Work::wait()
// orders the compute stream after the collective and returns without blocking the host
// (barrier() alone blocks, as it promises the host that every rank arrived). Deadlines
// and NCCL's asynchronous errors are watched by one thread per communicator (Watchdog):
// a collective that fails or is late ends the job with a message naming it, since its
// peers are stuck and no host wait is there to throw.
#pragma once

#include <nccl.h>

#include <memory>
#include <mutex>
#include <string>

#include "core/api_profile.h"
#include "core/cuda/stream.h"
#include "zero/comm/communicator.h"
#include "zero/comm/mpi_comm.h"

namespace zt::comm::internal {
[[noreturn]] void throw_nccl_error(const char* file, int line, const char* call, ncclResult_t rc);
}

/// Throws zt::Error naming the NCCL call, its error string, file and line.
#define NCCL_CHECK(call)                                                              \
  do {                                                                                \
    ncclResult_t zt_nccl_rc_ = ZT_API(call);                                          \
    if (zt_nccl_rc_ != ncclSuccess)                                                   \
      ::zt::comm::internal::throw_nccl_error(__FILE__, __LINE__, #call, zt_nccl_rc_); \
  } while (0)

namespace zt::comm {

class Watchdog;

/// One GPU rank. bf16/f16 reductions are NCCL's (in the storage type, not fp32).
class NcclComm : public Communicator {
 public:
  /// Collective over MPI_COMM_WORLD. device: the CUDA ordinal, or -1 for
  /// (node-local rank) % (visible GPUs).
  explicit NcclComm(int device = -1);
  ~NcclComm() override;

  const char* backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }
  /// Fails local work, aborts the NCCL communicator and, with more than one rank, the job.
  void abort(const std::string& reason) override;
  std::string abort_reason() const override;
  /// The stream collectives run on.
  cudaStream_t stream() const { return stream_.get(); }

 protected:
  std::shared_ptr<Work> submit(Request req) override;

 private:
  friend class NcclWork;
  NcclComm(std::unique_ptr<MpiComm> boot, int device);
  // Records the failure and aborts the NCCL communicator (no MPI_Abort).
  void fail(const std::string& reason);
  void launch(const Request& req);
  // The NCCL communicator's asynchronous error, or "" (the watchdog's health check).
  std::string async_error() const;
  // A collective failed or passed its deadline: records why and ends the job.
  void watchdog_failed(const std::string& why);

  std::unique_ptr<MpiComm> boot_;  // bootstrap and all_gather_bytes
  int device_ = 0;
  ncclComm_t nccl_ = nullptr;
  cuda::Stream stream_;
  Tensor barrier_buf_;                  // one i32 on the device, all-reduced by barrier()
  std::unique_ptr<Watchdog> watchdog_;  // with more than one rank
  mutable std::mutex mu_;
  std::string abort_reason_;
};

}  // namespace zt::comm
