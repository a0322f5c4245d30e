// Streams, events, the current device and this thread's current compute streams.
#include "core/cuda/stream.h"

#include <array>
#include <atomic>
#include <utility>

#include "core/cuda/check.h"
#include "core/cuda/device_error.h"
#include "core/error.h"

namespace zt::cuda {

namespace {

// nullptr is the legacy default stream: one per device, shared by all threads.
thread_local std::array<cudaStream_t, kMaxCudaDevices> t_streams{};
thread_local bool t_capturing = false;

int resolve(int device) {
  int d = device < 0 ? current_device() : device;
  ZT_CHECK(d < kMaxCudaDevices, "CUDA device ", d, " out of range (zt supports ", kMaxCudaDevices,
           ")");
  return d;
}
}  // namespace

int current_device() {
  int d = 0;
  CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

DeviceGuard::DeviceGuard(int device) : prev_(current_device()), device_(device) {
  if (device_ != prev_) CUDA_CHECK(cudaSetDevice(device_));
}

DeviceGuard::~DeviceGuard() {
  if (device_ != prev_) cudaSetDevice(prev_);  // no throw from a destructor
}

Stream::Stream(int device, bool non_blocking, int priority) : device_(resolve(device)) {
  DeviceGuard g(device_);
  CUDA_CHECK(cudaStreamCreateWithPriority(
      &stream_, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault, priority));
}

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);  // returns at once; resources go when work is done
}

Stream::Stream(Stream&& o) noexcept
    : stream_(std::exchange(o.stream_, nullptr)), device_(o.device_) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = std::exchange(o.stream_, nullptr);
    device_ = o.device_;
  }
  return *this;
}

bool capturing() {
  return t_capturing;
}

void set_capturing(bool on) {
  t_capturing = on;
}

void check_not_capturing(const char* what) {
  if (t_capturing)
    ZT_FAIL("CUDA graph capture: the captured step did ", what,
            ", which a graph cannot replay. A captured step must run on the GPU alone: no "
            "host reads (item(), to_vector(), printing a GPU value), no host waits, no random "
            "numbers (dropout, random restarts); log outside the step, or train without "
            "train.cuda_graph");
}

RelaxedCapture::RelaxedCapture() : prev_(cudaStreamCaptureModeRelaxed) {
  CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&prev_));
}

RelaxedCapture::~RelaxedCapture() {
  cudaThreadExchangeStreamCaptureMode(&prev_);  // no throw from a destructor
}

void synchronize_stream(cudaStream_t stream) {
  check_not_capturing("a host wait on a GPU stream");
  ++::zt::detail::thread_work_counts().syncs;
  CUDA_CHECK(cudaStreamSynchronize(stream));
  raise_device_errors();
}

void Stream::synchronize() const {
  synchronize_stream(stream_);
}

Event::Event(bool enable_timing) {
  CUDA_CHECK(
      cudaEventCreateWithFlags(&event_, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}

Event::Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

void Event::record(cudaStream_t stream) {
  CUDA_CHECK(cudaEventRecord(event_, stream));
}

void Event::synchronize() const {
  check_not_capturing("a host wait on a GPU event");
  ++::zt::detail::thread_work_counts().syncs;
  CUDA_CHECK(cudaEventSynchronize(event_));
  raise_device_errors();
}

bool Event::query() const {
  return event_done(event_);
}

float Event::elapsed_ms(const Event& start) const {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

void stream_wait_event(cudaStream_t stream, const Event& event) {
  CUDA_CHECK(cudaStreamWaitEvent(stream, event.get(), 0));
}

cudaStream_t current_stream(int device) {
  return t_streams[resolve(device)];
}

void set_current_stream(cudaStream_t stream, int device) {
  t_streams[resolve(device)] = stream;
}

StreamGuard::StreamGuard(const Stream& stream)
    : prev_(current_stream(stream.device())), device_(stream.device()) {
  set_current_stream(stream.get(), device_);
}

StreamGuard::~StreamGuard() {
  t_streams[device_] = prev_;
}

int sm_count(int device) {
  static std::array<std::atomic<int>, kMaxCudaDevices> cache{};
  int d = resolve(device);
  int n = cache[d].load(std::memory_order_relaxed);
  if (n == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, d));
    cache[d].store(n, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace zt::cuda
