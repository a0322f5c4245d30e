// KernelProfile: per-kernel totals of one thread. CPU spans add their host-clock time at
// once; GPU spans keep their event pair until totals(), which waits for the events and
// returns the pairs to a pool, so a profile held over many steps creates events only
// for the most dispatches one totals() call had to account for.
#include "core/kernel_profile.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "core/error.h"
#ifdef ZT_WITH_CUDA
#include "core/cuda/stream.h"
#endif

namespace zt {

namespace {
thread_local KernelProfile* tl_profile = nullptr;
using Clock = std::chrono::steady_clock;
}  // namespace

struct KernelProfile::Impl {
  std::map<std::string, Entry, std::less<>> totals;
  // The open outermost span.
  const char* kernel = nullptr;
  Device device;
  Clock::time_point start;
  bool timed = false;
#ifdef ZT_WITH_CUDA
  struct Pending {
    Entry* entry;
    size_t start;  // index into events; the stop event follows it
  };
  std::vector<cuda::Event> events;  // pairs: [2k] start, [2k+1] stop, all on `gpu`
  int gpu = -1;                     // the one GPU timed (a thread works on one)
  std::vector<Pending> pending;
  size_t used = 0;  // events in use by pending pairs
#endif

  Entry& entry(const char* name) {
    auto it = totals.find(std::string_view(name));
    if (it == totals.end()) it = totals.emplace(name, Entry{name, 0, 0, 0}).first;
    return it->second;
  }
};

KernelProfile::KernelProfile() : impl_(std::make_unique<Impl>()) {
  ZT_CHECK(tl_profile == nullptr,
           "KernelProfile: this thread already runs a profile; end it before starting another");
  tl_profile = this;
}

KernelProfile::~KernelProfile() {
  tl_profile = nullptr;
}

void KernelProfile::clear() {
  (void)totals();  // settles the pending GPU pairs first
  impl_->totals.clear();
}

void KernelProfile::wait() {
#ifdef ZT_WITH_CUDA
  if (!impl_->pending.empty()) impl_->events[impl_->pending.back().start + 1].synchronize();
#endif
}

std::vector<KernelProfile::Entry> KernelProfile::totals() {
#ifdef ZT_WITH_CUDA
  for (const Impl::Pending& p : impl_->pending) {
    const cuda::Event& stop = impl_->events[p.start + 1];
    stop.synchronize();
    p.entry->ms += stop.elapsed_ms(impl_->events[p.start]);
  }
  impl_->pending.clear();
  impl_->used = 0;
#endif
  std::vector<Entry> out;
  for (const auto& [name, e] : impl_->totals) out.push_back(e);
  std::stable_sort(out.begin(), out.end(),
                   [](const Entry& a, const Entry& b) { return a.ms > b.ms; });
  return out;
}

KernelProfile::Span::Span(KernelProfile& p, const char* kernel, const Device& d)
    : p_(p), outer_(p.depth_++ == 0) {
  if (!outer_) return;
  Impl& im = *p_.impl_;
  im.kernel = kernel;
  im.device = d;
  im.timed = !(d.is_cuda() && graph_capturing());
#ifdef ZT_WITH_CUDA
  if (d.is_cuda() && im.gpu < 0) im.gpu = d.index;
  if (d.is_cuda() && d.index != im.gpu) im.timed = false;  // the events are on im.gpu
#endif
  if (!im.timed) return;
#ifdef ZT_WITH_CUDA
  if (d.is_cuda()) {
    try {
      cuda::DeviceGuard g(d.index);
      while (im.events.size() < im.used + 2) im.events.emplace_back(/*enable_timing=*/true);
      im.events[im.used].record(cuda::current_stream(d.index));
    } catch (...) {
      // As in the destructor, a failed record loses this sample. A throw from here would
      // skip the destructor and leave the nesting depth raised for good.
      im.timed = false;
    }
  }
#endif
  im.start = Clock::now();  // after the start event: host_ms leaves the records out
}

KernelProfile::Span::~Span() {
  --p_.depth_;
  if (!outer_) return;
  Impl& im = *p_.impl_;
  if (!im.timed) return;
  const double host_ms = std::chrono::duration<double, std::milli>(Clock::now() - im.start).count();
  Entry& e = im.entry(im.kernel);
  ++e.calls;
  e.host_ms += host_ms;
#ifdef ZT_WITH_CUDA
  if (im.device.is_cuda()) {
    try {
      cuda::DeviceGuard g(im.device.index);
      im.events[im.used + 1].record(cuda::current_stream(im.device.index));
      im.pending.push_back({&e, im.used});
      im.used += 2;
    } catch (...) {  // a failed record loses one sample; the kernel's own error surfaces
    }
    return;
  }
#endif
  e.ms += host_ms;
}

namespace detail {
KernelProfile* active_kernel_profile() {
  return tl_profile;
}
}  // namespace detail

}  // namespace zt
