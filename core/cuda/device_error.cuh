// The kernels' side of core/cuda/device_error.h: record an argument error without
// stopping the kernel (the first error per device wins; later ones are dropped).
#pragma once

#include "core/cuda/device_error.h"

namespace zt::cuda {

__device__ __forceinline__ void report_device_error(DeviceErrorSlot slot, int kind, int op,
                                                    long long value, long long bound,
                                                    long long position) {
  if (atomicCAS(slot.claim, 0, 1) != 0) return;  // an earlier error holds the record
  volatile DeviceError* e = slot.record;
  e->op = op;
  e->value = value;
  e->bound = bound;
  e->position = position;
  __threadfence_system();
  e->kind = kind;  // published last: the host reads a complete record
}

}  // namespace zt::cuda
