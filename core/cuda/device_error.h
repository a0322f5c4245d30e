// Argument errors that kernels find (an index or a class target out of range) without a
// host wait. Checking an index on the host first would cost a synchronization per op;
// instead the CUDA kernel checks every element, keeps its memory accesses in bounds (it
// skips or clamps the bad element), and records the first error of the device in a small
// record in mapped host memory. The host raises it as zt::Error at its next wait on the
// GPU (synchronize_stream and Event::synchronize: every copy to the host, item(), stream
// and event waits), naming the op, the value, the valid range and the position. The step
// that issued the bad op produced garbage and is not trusted: the error surfaces before
// its loss can be read. The CPU kernels' callers check before they run, as always.
// The first error is claimed with an atomic on a word in device memory (atomics on
// mapped host memory are not guaranteed over PCIe); only the claiming thread writes the
// host record, with plain stores, its kind last.
#pragma once

#include <cstdint>

namespace zt::cuda {

/// What a kernel found wrong (DeviceError::kind); 0: nothing.
enum DeviceErrorKind : int {
  kNoDeviceError = 0,
  kIndexOutOfRange = 1,   ///< an index (index_select, embedding, gather, one_hot, bincount)
  kTargetOutOfRange = 2,  ///< a cross_entropy target neither in range nor ignore_index
};

/// The op that reported (DeviceError::op), for the message.
enum DeviceErrorOp : int {
  kOpIndexSelect = 1,
  kOpGather = 2,
  kOpOneHot = 3,
  kOpCrossEntropy = 4,
  kOpBincount = 5,
};

/// One device's first recorded error, written by kernels (report_device_error in
/// device_error.cuh), read and cleared by the host.
struct DeviceError {
  int kind;
  int op;
  long long value;
  long long bound;     ///< the valid range is [0, bound)
  long long position;  ///< the element of the index (or target) tensor
};

/// What a kernel takes to report: the claim word (device memory) and the record (mapped
/// host memory, as a device pointer). Passed by value.
struct DeviceErrorSlot {
  int* claim;
  DeviceError* record;
};

/// The current device's slot, allocated on first use and kept for the life of the
/// process.
DeviceErrorSlot device_error_record();

/// Throws zt::Error for the first error any device recorded, and clears it (the claim
/// word is reset on that device's current stream). The host waits call it; no-op (a few
/// loads) when nothing was recorded.
void raise_device_errors();

}  // namespace zt::cuda
