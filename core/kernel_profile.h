// Where a thread's kernel time goes. While a KernelProfile lives, each kernel-table
// dispatch (core/kernels.h) of its thread is timed and summed per kernel name: CPU
// kernels by the host clock (they run inside the call), CUDA kernels by two events
// recorded around the dispatch on the current stream, so in GPU time, and the host time
// spent issuing them beside it (Entry::host_ms: what a launch-bound step spends where). A dispatch
// made inside another one (a CPU bf16 gemm converting its operands) counts toward the outer one.
// Timing costs host time per dispatch (a clock read, or two event records), so time a step without
// a profile and use a profile for the split. Inside a CUDA graph capture nothing is timed (events
// would be captured too), and of several GPUs only the first one the thread dispatches to is timed
// (zt threads each work on one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace zt {

class KernelProfile {
 public:
  /// One kernel's totals.
  struct Entry {
    std::string kernel;  ///< the kernel-table name: "gemm", "conv_forward", ...
    int64_t calls = 0;   ///< outermost dispatches of it
    double ms = 0;       ///< summed time in milliseconds
    /// Summed host time inside the dispatches, in milliseconds: on the CPU the same as
    /// ms; on a GPU what issuing the work cost the host (checks, allocation, descriptor
    /// setup, launches; the profile's own event records excluded).
    double host_ms = 0;
  };

  /// Starts profiling the calling thread; a thread runs one profile at a time.
  KernelProfile();
  /// Stops profiling; GPU work still running is not waited for.
  ~KernelProfile();
  KernelProfile(const KernelProfile&) = delete;
  KernelProfile& operator=(const KernelProfile&) = delete;

  /// The totals so far, most time first. Waits for the GPU work timed so far (counted
  /// as host waits in core/work_counts.h).
  std::vector<Entry> totals();
  /// Waits for the last timed dispatch's GPU work to end (and its stream's work before it),
  /// without reading the event pairs as totals() does: for a wall clock that should end
  /// with the GPU's work, not with the host's queueing of it. Nothing to wait for on a CPU.
  void wait();
  /// Forgets the totals so far.
  void clear();

  /// Times one dispatch (the dispatch macro's tool): begins at construction, ends at
  /// destruction. A span opened inside another one times nothing.
  class Span {
   public:
    Span(KernelProfile& p, const char* kernel, const Device& d);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    KernelProfile& p_;
    bool outer_;
  };

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int depth_ = 0;  // open spans
};

namespace detail {
/// The calling thread's running profile, or null.
KernelProfile* active_kernel_profile();

/// fn(), timed as `kernel` on `d` when the thread runs a profile.
template <typename Fn>
decltype(auto) profiled(const char* kernel, const Device& d, Fn&& fn) {
  KernelProfile* p = active_kernel_profile();
  if (p == nullptr) return fn();
  KernelProfile::Span span(*p, kernel, d);
  return fn();
}
}  // namespace detail

}  // namespace zt
