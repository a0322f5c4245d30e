// Deferred argument errors from kernels (core/cuda/device_error.h): one record per
// device in mapped, pinned host memory, checked by the host after each wait.
#include "core/cuda/device_error.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <string>

#include "core/cuda/check.h"
#include "core/error.h"

namespace zt::cuda {

namespace {

constexpr int kMaxDevices = 64;
std::atomic<DeviceError*> g_records[kMaxDevices];  // host addresses; null until used
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
    default:
      return "a CUDA kernel";
  }
}

}  // namespace

DeviceError* device_error_record() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  ZT_CHECK(dev >= 0 && dev < kMaxDevices, "device_error_record: device ", dev, " beyond ",
           kMaxDevices);
  DeviceError* r = g_records[dev].load(std::memory_order_acquire);
  if (r == nullptr) {
    std::lock_guard<std::mutex> lock(g_mu);
    r = g_records[dev].load(std::memory_order_acquire);
    if (r == nullptr) {
      void* h = nullptr;
      CUDA_CHECK(
          cudaHostAlloc(&h, sizeof(DeviceError), cudaHostAllocMapped | cudaHostAllocPortable));
      r = static_cast<DeviceError*>(h);
      *r = DeviceError{};
      g_records[dev].store(r, std::memory_order_release);
    }
  }
  void* d = nullptr;  // the same address under unified addressing; asked, not assumed
  CUDA_CHECK(cudaHostGetDevicePointer(&d, r, 0));
  return static_cast<DeviceError*>(d);
}

void raise_device_errors() {
  for (int dev = 0; dev < kMaxDevices; ++dev) {
    DeviceError* r = g_records[dev].load(std::memory_order_acquire);
    if (r == nullptr) continue;
    volatile int* kind = &r->kind;
    if (*kind <= kNoDeviceError) continue;
    std::lock_guard<std::mutex> lock(g_mu);
    if (*kind <= kNoDeviceError) continue;  // another thread raised it
    const DeviceError e = *r;
    *r = DeviceError{};
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
