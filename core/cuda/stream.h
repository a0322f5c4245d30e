// Streams, events and the current device for CUDA work. Each thread has a current
// compute stream per device (by default the legacy default stream, which orders all
// zt work on a device and so lets the caching allocator reuse freed blocks safely).
// Kernels and cuBLAS calls go to current_stream(). Side streams (NCCL's) order
// themselves against it with events:
//   Event e; e.record(current_stream()); stream_wait_event(nccl_stream, e);
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <type_traits>

#include "core/device.h"
#include "core/error.h"

namespace zt::cuda {

/// The CUDA device this thread is using (cudaGetDevice).
int current_device();

/// Makes `device` current for this thread while in scope; restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_;
  int device_;
};

/// An owned CUDA stream on one device; destroyed (after its work finishes) with the object.
class Stream {
 public:
  /// A new stream on `device` (-1: the current one); non-blocking streams do not
  /// synchronize with the legacy default stream.
  explicit Stream(int device = -1, bool non_blocking = true, int priority = 0);
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  /// Blocks the host until all work queued on the stream is done.
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

/// An owned CUDA event (timing disabled unless asked: cheaper for ordering).
class Event {
 public:
  /// An event on the current device.
  explicit Event(bool enable_timing = false);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  /// Captures the work queued on `stream` so far.
  void record(cudaStream_t stream);
  /// Blocks the host until the recorded work is done.
  void synchronize() const;
  /// True when the recorded work is done (never blocks).
  bool query() const;
  /// Milliseconds from `start` to this event (both recorded, timing enabled).
  float elapsed_ms(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

/// Blocks the host until the work queued on `stream` is done; counted as a
/// synchronization (core/work_counts.h), as every host wait in the backend is.
void synchronize_stream(cudaStream_t stream);

/// Makes future work on `stream` wait for the work captured by `event` (no host block).
void stream_wait_event(cudaStream_t stream, const Event& event);

/// This thread's compute stream on `device` (-1: the current device).
cudaStream_t current_stream(int device = -1);
/// Sets this thread's compute stream on `device` (nullptr: the legacy default stream).
void set_current_stream(cudaStream_t stream, int device = -1);

/// Makes `stream` this thread's compute stream on its device while in scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  cudaStream_t prev_;
  int device_;
};

/// True while this thread is capturing a CUDA graph (core/cuda/graph.h).
bool capturing();
/// Marks this thread as capturing a graph, or not (Graph::capture).
void set_capturing(bool on);
/// Throws, naming `what`, when this thread is capturing a graph: for work a graph cannot
/// hold (a host wait on the GPU, a value read back, random numbers drawn on the host's
/// counter, a lazy set-up that synchronizes).
void check_not_capturing(const char* what);

/// Allows this thread, while in scope, the calls a capture forbids because they are not
/// stream work (cudaMalloc, cudaMallocHost): memory set up for a graph, not recorded in it.
class RelaxedCapture {
 public:
  RelaxedCapture();
  ~RelaxedCapture();
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode prev_;
};

/// This thread's library handle (cuBLAS, cuBLASLt, cuDNN) on `device`: made by create()
/// with the device current on first use, released by Destroy{}(handle) when the thread
/// ends. Each kind of handle (each Destroy type) has its own table.
template <typename H, typename Create, typename Destroy>
H thread_handle(int device, Create create, Destroy) {
  struct Owned {
    H handle = nullptr;
    ~Owned() {
      if (handle) Destroy{}(handle);
    }
  };
  thread_local std::array<Owned, kMaxCudaDevices> owned;
  ZT_CHECK(device >= 0 && device < kMaxCudaDevices, "CUDA device ", device,
           " out of range (zt supports ", kMaxCudaDevices, ")");
  Owned& o = owned[static_cast<size_t>(device)];
  if (!o.handle) {
    DeviceGuard g(device);
    o.handle = create();
  }
  return o.handle;
}

/// Binds this thread's library handle of `device` to `stream` with set(handle, stream)
/// unless its last bind was to that stream: binding costs microseconds even to the stream
/// already set. The first use binds whatever the stream (the default one included: a set
/// may do more than set the stream, as cuBLAS's gives it a workspace). A set that returns
/// false (its work only partly done, as in a graph capture) is not remembered, so the next
/// use binds again. One table per handle type and call site.
template <typename H, typename Set>
void bind_stream(H handle, int device, cudaStream_t stream, Set set) {
  struct Bound {
    cudaStream_t stream = nullptr;
    bool set = false;
  };
  thread_local std::array<Bound, kMaxCudaDevices> bound{};
  Bound& last = bound[static_cast<size_t>(device)];
  if (last.set && last.stream == stream) return;
  bool done = true;
  if constexpr (std::is_same_v<decltype(set(handle, stream)), bool>) {
    done = set(handle, stream);
  } else {
    set(handle, stream);
  }
  last = {stream, done};
}

/// Multiprocessor count of `device` (cached): sizes persistent grids.
int sm_count(int device);

}  // namespace zt::cuda
