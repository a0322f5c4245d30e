// The CUDA caching allocator. Freed blocks are kept in per-(device, stream) free lists
// keyed by size class and handed out again without cudaMalloc/cudaFree (both of which
// synchronize the device). It is registered for DeviceType::CUDA at static-init time
// without touching the driver; the first allocation starts CUDA.
//
// Stream semantics: a block belongs to the stream that was current when it was
// allocated and is only reused on that stream, so reuse is ordered by the stream
// itself. Memory that another stream (NCCL's) reads or writes must stay alive until
// that stream's work is ordered before the owning stream (stream_wait_event).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/allocator.h"
#include "core/tensor.h"

namespace zt::cuda {

/// At least `bytes` of scratch on CUDA device `d` from the caching allocator, ordered on
/// the current stream like any tensor: an i64 tensor of ceil(bytes / 8) elements, to be
/// used through data_ptr(). Undefined for 0 bytes.
inline Tensor device_bytes(size_t bytes, Device d) {
  if (bytes == 0) return Tensor();
  return Tensor::empty({static_cast<int64_t>((bytes + 7) / 8)}, DType::i64, d);
}

class CachingAllocator final : public Allocator {
 public:
  /// A block of at least `bytes` on `d`, from the cache or from cudaMalloc. On an
  /// out-of-memory error the device's cache is released and the allocation retried.
  void* allocate(size_t bytes, Device d) override;
  /// Returns a block to its free list (no cudaFree).
  void deallocate(void* p, size_t bytes, Device d) override;
  /// Bytes held in free lists, all devices.
  int64_t cached_bytes() const override;
  /// Frees every cached block (synchronizes each device that had some).
  void empty_cache() override;
  /// Bytes in blocks handed out and not yet returned (rounded sizes), all devices.
  int64_t allocated_bytes() const;
  /// The size class an allocation of `bytes` is rounded up to: multiples of 512 bytes
  /// below 1 MiB, then four classes per power of two (at most 25% slack).
  static size_t round_size(size_t bytes);

  // CUDA graph capture (core/cuda/graph.h). The capture stream's pool is the graph's
  // private pool: only work on that stream reuses its blocks, and empty_cache leaves it
  // alone while the graph lives. While a capture on `device` is open, every block freed on
  // that device that the capture did not hand out (one of another pool, or one of its own
  // stream's from before it began, a warm-up's) is held rather than reused: captured
  // kernels may have read it, and a replay will read it again.
  /// Opens a capture on (device, stream).
  void begin_capture(int device, cudaStream_t stream);
  /// Closes the open capture on `device` (the held blocks stay held).
  void end_capture(int device);
  /// The graph of (device, stream) is gone (its work done): held blocks return to their
  /// pools, the private pool's free blocks are freed, and its live blocks join the
  /// legacy default stream's pool when they are freed.
  void release_capture_pool(int device, cudaStream_t stream);
};

/// The process-wide CUDA allocator (also reachable as allocator_for(DeviceType::CUDA)).
CachingAllocator& caching_allocator();

}  // namespace zt::cuda
