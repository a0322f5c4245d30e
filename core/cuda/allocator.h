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

#include "core/allocator.h"

namespace zt::cuda {

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
};

/// The process-wide CUDA allocator (also reachable as allocator_for(DeviceType::CUDA)).
CachingAllocator& caching_allocator();

}  // namespace zt::cuda
