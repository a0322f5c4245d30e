// Optimizer offload: host masters and gradient buffers, and the copies around the step.
#include "zero/offload.h"

#include <algorithm>
#include <optional>

#include "core/ops.h"
#include "core/ops/dispatch.h"
#include "core/storage.h"
#include "core/work_counts.h"

#ifdef ZT_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#endif

namespace zt::zero {

#ifdef ZT_WITH_CUDA
struct OptimizerOffload::Streams {
  explicit Streams(int device) : device(device), copy(device) {}
  int device;
  cuda::Stream copy;  // device <-> host copies
};
#else
struct OptimizerOffload::Streams {};
#endif

OptimizerOffload::OptimizerOffload(const OffloadOptimizer& config, Device device)
    : config_(config), device_(device), moves_(config.enabled() && !device.is_cpu()) {
#ifdef ZT_WITH_CUDA
  if (moves_) {
    cuda::DeviceGuard g(device_.index);
    streams_ = std::make_unique<Streams>(device_.index);
  }
#endif
}

OptimizerOffload::~OptimizerOffload() {
#ifdef ZT_WITH_CUDA
  // Uploads may still read the host buffers this object (and the masters) own.
  try {
    if (streams_) streams_->copy.synchronize();
  } catch (const std::exception&) {  // a failed device: nothing left to wait for
  }
#endif
}

// A contiguous host tensor charged to this thread's ledger under `tag`; page-locked when
// pin_memory is set (CUDA builds).
Tensor OptimizerOffload::host_buffer(int64_t numel, DType dtype, MemTag tag) const {
  MemTagScope scope(tag);
#ifdef ZT_WITH_CUDA
  if (config_.pin_memory) {
    const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
    std::shared_ptr<MemoryLedger> ledger = current_ledger();
    ledger->add(Device::cpu(), tag, static_cast<int64_t>(bytes));  // a limit refuses first
    void* p = nullptr;
    // On the training GPU's context: no stray context on the process's first GPU.
    std::optional<cuda::DeviceGuard> on;
    if (device_.is_cuda()) on.emplace(device_.index);
    cudaError_t e = ZT_API(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault));
    if (e != cudaSuccess) {  // the ledger gives the bytes back before the error goes up
      ledger->sub(Device::cpu(), tag, static_cast<int64_t>(bytes));
      cuda::detail::throw_cuda_error(e, "cudaHostAlloc (optimizer offload's pinned host buffer)",
                                     __FILE__, __LINE__);
    }
    auto impl = std::make_shared<TensorImpl>();
    impl->storage =
        std::make_shared<Storage>(p, bytes, Device::cpu(), [ledger, tag, bytes](void* q) {
          cudaFreeHost(q);
          ledger->sub(Device::cpu(), tag, static_cast<int64_t>(bytes));
        });
    impl->sizes = {numel};
    impl->strides = {1};
    impl->dtype = dtype;
    impl->device = Device::cpu();
    return Tensor(std::move(impl));
  }
#endif
  return Tensor::empty({numel}, dtype, Device::cpu());
}

void OptimizerOffload::place(ZeroParam& z) {
  if (!moves_) return;
  autograd::NoGradGuard ng;
  const int64_t n = z.part.shard_numel;
  Tensor master = host_buffer(n, DType::f32, MemTag::kOptimState);
  master.copy_(z.fp32_shard());  // the device master (or f32 shard), converted on the host
  z.master = master;             // frees a device master
  Placed p{&z, host_buffer(n, DType::f32, MemTag::kGradShard), Tensor()};
  if (z.dtype != DType::f32) p.staging = host_buffer(n, z.dtype, MemTag::kCommBuffer);
  placed_.push_back(std::move(p));
}

void OptimizerOffload::grads_to_host() {
  if (!moves_) return;
#ifdef ZT_WITH_CUDA
  cuda::DeviceGuard g(device_.index);
  // The copy stream starts after the reduce-scatters queued on the compute stream.
  cuda::Event ready;
  ready.record(cuda::current_stream(device_.index));
  cuda::stream_wait_event(streams_->copy.get(), ready);
  for (Placed& p : placed_) {
    CUDA_CHECK(cudaMemcpyAsync(p.host_grad.data_ptr(), p.z->grad_shard.data_ptr(),
                               p.host_grad.numel() * sizeof(float), cudaMemcpyDeviceToHost,
                               streams_->copy.get()));
    ++::zt::detail::thread_work_counts().d2h_copies;
  }
  streams_->copy.synchronize();
#else
  for (Placed& p : placed_) p.host_grad.copy_(p.z->grad_shard);
#endif
  for (Placed& p : placed_) p.z->master.set_grad(p.host_grad);
}

void OptimizerOffload::params_to_device() {
  if (!moves_) return;
  autograd::NoGradGuard ng;
  for (Placed& p : placed_)
    if (p.staging.defined()) p.staging.copy_(p.z->master);  // rounded on the host
#ifdef ZT_WITH_CUDA
  cuda::DeviceGuard g(device_.index);
  // Uploads overwrite the shards: they wait for the compute stream's last reads.
  cuda::Event ready;
  ready.record(cuda::current_stream(device_.index));
  cuda::stream_wait_event(streams_->copy.get(), ready);
  for (Placed& p : placed_) {
    const Tensor& src = p.staging.defined() ? p.staging : p.z->master;
    CUDA_CHECK(cudaMemcpyAsync(p.z->shard.data_ptr(), src.data_ptr(),
                               src.numel() * dtype_size(src.dtype()), cudaMemcpyHostToDevice,
                               streams_->copy.get()));
    ++::zt::detail::thread_work_counts().h2d_copies;
  }
  cuda::Event uploaded;
  uploaded.record(streams_->copy.get());
  cuda::stream_wait_event(cuda::current_stream(device_.index), uploaded);
  // The uploads wrote the shards: a graph recorded before the step sees them as written, as
  // it would an optimizer's in-place update on the device.
  for (Placed& p : placed_) ::zt::detail::count_writes({p.z->shard});
    // The host buffers are next written after grads_to_host(), which waits for this
    // stream (the uploads included) before returning.
#else
  for (Placed& p : placed_) p.z->shard.copy_(p.staging.defined() ? p.staging : p.z->master);
#endif
}

std::string OptimizerOffload::describe() const {
  if (!config_.enabled()) return "optimizer state on " + device_.str();
  if (!moves_)
    return "offload_optimizer: optimizer state on cpu (training on the cpu: it already lives "
           "in host memory, nothing is moved)";
  return std::string("offload_optimizer: fp32 master shards and optimizer state on cpu (") +
         (config_.pin_memory ? "pinned" : "pageable") +
         " host memory), updated by the CPU optimizer; gradients copied from and parameters to " +
         device_.str();
}

}  // namespace zt::zero
