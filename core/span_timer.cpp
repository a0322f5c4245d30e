// SpanTimer: host-clock spans on the CPU; on a GPU, event pairs kept in a pool that
// take_seconds() settles, so a timer held over a run creates events only for the most
// spans one window held.
#include "core/span_timer.h"

#include <chrono>
#include <utility>
#include <vector>

#include "core/error.h"
#ifdef ZT_WITH_CUDA
#include "core/cuda/stream.h"
#endif

namespace zt {

struct SpanTimer::Impl {
  Device device;
  bool open = false;
  double seconds = 0.0;  // spans settled so far
  std::chrono::steady_clock::time_point start;
#ifdef ZT_WITH_CUDA
  std::vector<cuda::Event> events;  // pairs: [2k] start, [2k+1] end
  size_t used = 0;                  // events of the spans not yet settled
  // The one stream every span is recorded on (set by the first), so that the last end
  // event done means every earlier one is.
  cudaStream_t stream = nullptr;
  bool stream_set = false;
  void record() {
    cuda::DeviceGuard g(device.index);
    const cudaStream_t s = cuda::current_stream(device.index);
    ZT_CHECK(!stream_set || s == stream, "SpanTimer: spans on another stream (",
             static_cast<const void*>(s), ") than its first one's (",
             static_cast<const void*>(stream), "); time each stream with a timer of its own");
    stream = s;
    stream_set = true;
    if (events.size() == used) events.emplace_back(/*enable_timing=*/true);
    events[used++].record(s);
  }
#endif
};

SpanTimer::SpanTimer(Device device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
}

SpanTimer::~SpanTimer() = default;

void SpanTimer::begin() {
  ZT_CHECK(!impl_->open, "SpanTimer: begin() while a span is open");
#ifdef ZT_WITH_CUDA
  if (impl_->device.is_cuda()) {
    impl_->record();  // first: a refused span leaves the timer as it was
    impl_->open = true;
    return;
  }
#endif
  impl_->open = true;
  impl_->start = std::chrono::steady_clock::now();
}

void SpanTimer::end() {
  ZT_CHECK(impl_->open, "SpanTimer: end() without begin()");
#ifdef ZT_WITH_CUDA
  if (impl_->device.is_cuda()) {
    impl_->record();
    impl_->open = false;
    return;
  }
#endif
  impl_->open = false;
  impl_->seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->start).count();
}

double SpanTimer::take_seconds() {
  Impl& im = *impl_;
#ifdef ZT_WITH_CUDA
  const size_t ended = im.open ? im.used - 1 : im.used;  // an open span stays for later
  if (im.device.is_cuda() && ended > 0) {
    cuda::DeviceGuard g(im.device.index);
    im.events[ended - 1].synchronize();
    for (size_t k = 0; k < ended; k += 2)
      im.seconds += 1e-3 * static_cast<double>(im.events[k + 1].elapsed_ms(im.events[k]));
    if (im.open) std::swap(im.events[0], im.events[ended]);  // the open span's start first
    im.used -= ended;
  }
#endif
  const double s = im.seconds;
  im.seconds = 0.0;
  return s;
}

}  // namespace zt
