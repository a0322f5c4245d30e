// Counts of the device work the calling thread has issued: kernel-table dispatches on
// either device and, on CUDA, kernel and library launches, host synchronizations and
// copies between host and device memory and the library calls made, and on either device
// the values the host reads back from tensors (item(), to_vector()). The counts are per thread (a
// thread rank's counts are its own) and cost one increment each; zt-bench prints them per step, and
// a steady-state step should show no synchronizations at all.
#pragma once

#include <cstdint>

namespace zt {

/// Running totals for one thread; subtract two snapshots to count a stretch of work.
struct WorkCounts {
  int64_t dispatches = 0;  ///< kernel-table calls (core/kernels.h), any device
  int64_t launches = 0;    ///< CUDA kernels and cuBLAS / cuDNN compute calls
  int64_t syncs = 0;       ///< host waits on a stream, an event or the device
  int64_t d2h_copies = 0;  ///< device-to-host copies (a tensor read also waits)
  int64_t h2d_copies = 0;  ///< host-to-device tensor copies and optimizer table uploads
  /// Tensor::to_vector / item calls, any device: on a GPU each is a wait, so a CPU run
  /// that reads nothing back shows a step that would not synchronize either.
  int64_t host_reads = 0;
  /// CUDA runtime, cuBLAS, cuDNN and NCCL calls (core/api_profile.h times them per site)
  int64_t api_calls = 0;

  WorkCounts operator-(const WorkCounts& o) const {
    return {dispatches - o.dispatches, launches - o.launches,     syncs - o.syncs,
            d2h_copies - o.d2h_copies, h2d_copies - o.h2d_copies, host_reads - o.host_reads,
            api_calls - o.api_calls};
  }
};

/// The calling thread's totals so far.
WorkCounts work_counts();

namespace detail {
/// The calling thread's counters, for the places that issue the work.
WorkCounts& thread_work_counts();
}  // namespace detail

}  // namespace zt
