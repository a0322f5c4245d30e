// CUDA caching allocator (see allocator.h) and the synchronous host <-> device copies.
// The copies live here because Tensor's cross-device copy_ calls them: every program
// that can move a tensor to the GPU therefore links this file, and with it the static
// registration of the allocator (a static library drops unreferenced object files).
#include "core/cuda/allocator.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "core/error.h"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;  // below this, 512-byte granules
constexpr size_t kGranule = 512;

struct Block {
  size_t size;
  int device;
  cudaStream_t stream;
  uint64_t capture = 0;  // the capture that handed it out (Capture::id), 0: none
};

// An open capture on a device: its stream and a number no other capture had.
struct Capture {
  cudaStream_t stream;
  uint64_t id;
};

using PoolKey = std::pair<int, cudaStream_t>;
using FreeList = std::map<size_t, std::vector<void*>>;  // size class -> blocks

struct State {
  mutable std::mutex mu;
  std::map<PoolKey, FreeList> pools;
  std::unordered_map<void*, Block> live;
  int64_t cached = 0;
  int64_t allocated = 0;
  std::map<int, Capture> capturing;                              // device -> open capture
  uint64_t captures = 0;                                         // captures begun
  std::map<PoolKey, std::vector<std::pair<void*, Block>>> held;  // by capture pool
  std::set<PoolKey> private_pools;                               // pools of live graphs
};

State& state() {
  static State* s = new State();  // never destroyed: tensors may be freed during exit
  return *s;
}

// The capture a block handed out on (device, stream) now belongs to: the one open on that
// device and stream, if any (0: none). Caller holds mu.
uint64_t capture_of(const State& s, int device, cudaStream_t stream) {
  auto cap = s.capturing.find(device);
  return cap != s.capturing.end() && cap->second.stream == stream ? cap->second.id : 0;
}

// Frees the cached blocks of one device (all devices when device < 0). Caller holds mu.
void release_cached(State& s, int device) {
  std::vector<int> synced;
  for (auto it = s.pools.begin(); it != s.pools.end();) {
    int dev = it->first.first;
    if ((device >= 0 && dev != device) || s.private_pools.count(it->first)) {
      ++it;
      continue;
    }
    DeviceGuard g(dev);
    bool seen = false;
    for (int d : synced) seen |= d == dev;
    if (!seen) {
      // Work queued before the blocks were returned may still use them.
      ++::zt::detail::thread_work_counts().syncs;
      CUDA_CHECK(cudaDeviceSynchronize());
      synced.push_back(dev);
    }
    for (auto& [size, blocks] : it->second) {
      for (void* p : blocks) {
        CUDA_CHECK(cudaFree(p));
        s.cached -= static_cast<int64_t>(size);
      }
    }
    it = s.pools.erase(it);
  }
}

struct Registrar {
  Registrar() { register_allocator(DeviceType::CUDA, &caching_allocator()); }
};
Registrar g_registrar;

// The device that owns a device pointer.
int device_of(const void* p) {
  cudaPointerAttributes attr{};
  CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  ZT_CHECK(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged,
           "expected a GPU pointer for a host <-> device copy");
  return attr.device;
}

}  // namespace

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes < kSmallLimit) return std::max(kGranule, (bytes + kGranule - 1) / kGranule * kGranule);
  size_t p = size_t{1} << (63 - __builtin_clzll(bytes));  // largest power of two <= bytes
  size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes, Device d) {
  ZT_CHECK(d.is_cuda(), "CUDA allocator asked for ", d.str(), " memory");
  State& s = state();
  size_t size = round_size(bytes);
  cudaStream_t stream = current_stream(d.index);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto pool = s.pools.find({d.index, stream});
    if (pool != s.pools.end()) {
      auto it = pool->second.find(size);
      if (it != pool->second.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        s.cached -= static_cast<int64_t>(size);
        s.allocated += static_cast<int64_t>(size);
        s.live.emplace(p, Block{size, d.index, stream, capture_of(s, d.index, stream)});
        return p;
      }
    }
  }
  DeviceGuard g(d.index);
  void* p = nullptr;
  cudaError_t st;
  {
    RelaxedCapture relaxed;  // in a capture the block joins the graph's private pool
    st = ZT_API(cudaMalloc(&p, size));
  }
  if (st == cudaErrorMemoryAllocation && capturing()) {
    cudaGetLastError();
    throw OutOfMemoryError(::zt::detail::cat(
        "out of GPU memory on ", d.str(), " while capturing a CUDA graph: asked for ", bytes,
        " bytes. HINT: a capture cannot free the cache; lower the batch size or train without "
        "train.cuda_graph"));
  }
  if (st == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    std::lock_guard<std::mutex> lock(s.mu);
    release_cached(s, d.index);
    st = ZT_API(cudaMalloc(&p, size));
  }
  if (st == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemoryError(::zt::detail::cat(
        "out of GPU memory on ", d.str(), ": asked for ", bytes, " bytes (", size, " rounded); ",
        free_b, " of ", total_b, " bytes free, ", allocated_bytes(),
        " held by zt tensors. HINT: lower the batch size, or check memory_stats() for the tag "
        "that grows"));
  }
  CUDA_CHECK_STATUS(st, "cudaMalloc");
  std::lock_guard<std::mutex> lock(s.mu);
  s.allocated += static_cast<int64_t>(size);
  s.live.emplace(p, Block{size, d.index, stream, capture_of(s, d.index, stream)});
  return p;
}

void CachingAllocator::deallocate(void* p, size_t, Device) {
  if (p == nullptr) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.live.find(p);
  ZT_CHECK(it != s.live.end(), "CUDA allocator: freeing a pointer it did not allocate");
  Block b = it->second;
  s.live.erase(it);
  // During a capture only a block the capture itself handed out may be handed out again:
  // captured kernels may have read any other (one of another pool, or one of the
  // capture's stream from before it began), and a replay will read it again.
  if (auto cap = s.capturing.find(b.device);
      cap != s.capturing.end() && b.capture != cap->second.id) {
    s.held[{b.device, cap->second.stream}].emplace_back(p, b);  // still counted as allocated
    return;
  }
  s.pools[{b.device, b.stream}][b.size].push_back(p);
  s.allocated -= static_cast<int64_t>(b.size);
  s.cached += static_cast<int64_t>(b.size);
}

int64_t CachingAllocator::cached_bytes() const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.cached;
}

int64_t CachingAllocator::allocated_bytes() const {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.allocated;
}

void CachingAllocator::empty_cache() {
  check_not_capturing("empty_cache");
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  release_cached(s, -1);
}

void CachingAllocator::begin_capture(int device, cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ZT_CHECK(!s.capturing.count(device), "CUDA graph: a capture is already open on cuda:", device,
           "; capture one graph at a time per device");
  s.capturing[device] = Capture{stream, ++s.captures};
  s.private_pools.insert({device, stream});
}

void CachingAllocator::end_capture(int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.capturing.erase(device);
}

void CachingAllocator::release_capture_pool(int device, cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  DeviceGuard g(device);
  ++::zt::detail::thread_work_counts().syncs;
  CUDA_CHECK(cudaDeviceSynchronize());  // the graph's last replay has finished
  const PoolKey key{device, stream};
  for (auto& [p, b] : s.held[key]) {
    s.pools[{b.device, b.stream}][b.size].push_back(p);
    s.allocated -= static_cast<int64_t>(b.size);
    s.cached += static_cast<int64_t>(b.size);
  }
  s.held.erase(key);
  if (auto pool = s.pools.find(key); pool != s.pools.end()) {
    for (auto& [size, blocks] : pool->second)
      for (void* p : blocks) {
        CUDA_CHECK(cudaFree(p));
        s.cached -= static_cast<int64_t>(size);
      }
    s.pools.erase(pool);
  }
  for (auto& [p, b] : s.live)
    if (b.device == device && b.stream == stream) b.stream = nullptr;
  s.private_pools.erase(key);
}

CachingAllocator& caching_allocator() {
  static CachingAllocator* a = new CachingAllocator();  // outlives every tensor
  return *a;
}

// Synchronous copies, ordered after the work already queued on the current stream.
void memcpy_h2d(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check_not_capturing("a copy from host memory");
  int dev = device_of(dst);
  DeviceGuard g(dev);
  cudaStream_t s = current_stream(dev);
  ++::zt::detail::thread_work_counts().h2d_copies;
  // `src` is pageable (Tensor::copy_ stages every upload in a fresh host tensor): the call
  // returns once the driver has taken its bytes, so the caller may free it without a wait.
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
}

void memcpy_d2h(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check_not_capturing("a read back to the host");
  int dev = device_of(src);
  DeviceGuard g(dev);
  cudaStream_t s = current_stream(dev);
  ++::zt::detail::thread_work_counts().d2h_copies;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  synchronize_stream(s);
}

}  // namespace zt::cuda
