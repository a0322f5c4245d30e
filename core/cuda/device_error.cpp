// Deferred argument errors from kernels (core/cuda/device_error.h): one record per
// device in mapped, pinned host memory, checked by the host after each wait.
#include "core/cuda/device_error.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <string>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "core/error.h"

namespace zt::cuda {

namespace {

// Per device: the record's host address (null until used), its device address and the
// claim word in device memory.
std::atomic<DeviceError*> g_records[kMaxCudaDevices];
DeviceError* g_device_records[kMaxCudaDevices];
int* g_claims[kMaxCudaDevices];
std::mutex g_mu;

const char* op_name(int op) {
  switch (op) {
    case kOpIndexSelect:
      return "index_select";
    case kOpGather:
      return "gather";
    case kOpOneHot:
      return "one_hot";
    case kOpCrossEntropy:
      return "cross_entropy";
    case kOpBincount:
      return "bincount";
    default:
      return "a CUDA kernel";
  }
}

}  // namespace

DeviceErrorSlot device_error_record() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  ZT_CHECK(dev >= 0 && dev < kMaxCudaDevices, "device_error_record: device ", dev, " beyond ",
           kMaxCudaDevices);
  if (g_records[dev].load(std::memory_order_acquire) == nullptr) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_records[dev].load(std::memory_order_acquire) == nullptr) {
      void* h = nullptr;
      CUDA_CHECK(
          cudaHostAlloc(&h, sizeof(DeviceError), cudaHostAllocMapped | cudaHostAllocPortable));
      *static_cast<DeviceError*>(h) = DeviceError{};
      void* d = nullptr;  // the same address under unified addressing; asked, not assumed
      CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
      void* claim = nullptr;
      CUDA_CHECK(cudaMalloc(&claim, sizeof(int)));
      // cudaMemset runs on the legacy stream, which the backend's non-blocking streams do
      // not wait for: the word must be zero before any kernel can claim it.
      CUDA_CHECK(cudaMemset(claim, 0, sizeof(int)));
      CUDA_CHECK(cudaDeviceSynchronize());
      g_device_records[dev] = static_cast<DeviceError*>(d);
      g_claims[dev] = static_cast<int*>(claim);
      g_records[dev].store(static_cast<DeviceError*>(h), std::memory_order_release);
    }
  }
  return {g_claims[dev], g_device_records[dev]};
}

void raise_device_errors() {
  for (int dev = 0; dev < kMaxCudaDevices; ++dev) {
    DeviceError* r = g_records[dev].load(std::memory_order_acquire);
    if (r == nullptr) continue;
    volatile int* kind = &r->kind;
    if (*kind <= kNoDeviceError) continue;
    std::lock_guard<std::mutex> lock(g_mu);
    if (*kind <= kNoDeviceError) continue;  // another thread raised it
    const DeviceError e = *r;
    *r = DeviceError{};
    {  // free the claim for the next error, ordered after the work already queued
      DeviceGuard g(dev);
      CUDA_CHECK(cudaMemsetAsync(g_claims[dev], 0, sizeof(int), current_stream(dev)));
    }
    const std::string where = std::string(" (found on cuda:") + std::to_string(dev) +
                              " by the kernel, raised at the host's next wait on the GPU: the "
                              "op ran before this point, and the step that issued it is void)";
    if (e.kind == kTargetOutOfRange)
      ZT_FAIL(op_name(e.op), ": target ", e.value, " at position ", e.position,
              " is out of range [0, ", e.bound, ") and is not ignore_index", where);
    ZT_FAIL(op_name(e.op), ": index ", e.value, " at position ", e.position, " out of range [0, ",
            e.bound, ")", where);
  }
}

}  // namespace zt::cuda
