// Threads for CPU kernels. Each thread (and so each thread rank) has its own
// thread count; BLAS follows the count of the calling thread.
#pragma once

#include <cstdint>

namespace zt {

/// Threads this thread's kernels may use (default: $OMP_NUM_THREADS when set, else all
/// cores).
int num_threads();
/// Sets this thread's kernel thread count (>= 1); its BLAS calls follow it (cpu/blas.h).
void set_num_threads(int n);
/// Hardware cores.
int hardware_threads();

/// Runs fn(begin, end) over [0, n) split into chunks across num_threads() when n * cost
/// is large enough; serial otherwise.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn);

}  // namespace zt

#include "core/parallel_impl.h"
