// CUDA device queries for a CUDA build of zt. Without a driver or a GPU they answer
// "none" (false / 0) instead of throwing, so CPU-only machines run the same binary.
#include <cuda_runtime_api.h>

#include "core/cuda/stream.h"
#include "core/device.h"

namespace zt {

int cuda_device_count() {
  // Asked once: the set of visible devices is fixed when the runtime starts.
  static const int count = [] {
    int n = 0;
    cudaError_t s = cudaGetDeviceCount(&n);
    if (s != cudaSuccess) {
      cudaGetLastError();  // no driver / no device: clear the error, report none
      return 0;
    }
    return n;
  }();
  return count;
}

bool cuda_available() {
  return cuda_device_count() > 0;
}

bool graph_capturing() {
  return cuda::capturing();
}

}  // namespace zt
