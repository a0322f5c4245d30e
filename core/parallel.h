// Threads for CPU kernels. Each thread (and so each thread rank) has its own
// thread count; its BLAS calls run on those threads (cpu/blas.h).
#pragma once

#include <cstdint>

namespace zt {

/// Threads this thread's kernels may use. The default: $OMP_NUM_THREADS when set; else
/// the cores this process may run on, divided among the node's processes when a launcher
/// (mpirun) started several without pinning each to its own cores.
int num_threads();
/// Sets this thread's kernel thread count (>= 1), which its BLAS calls use too.
void set_num_threads(int n);
/// Cores this process may run on: its CPU affinity mask (as `nproc` counts them).
int hardware_threads();

namespace detail {
/// num_threads()'s default from $OMP_NUM_THREADS (0: unset), the process's cores, the
/// machine's, and the processes on the node (1 outside a launcher).
int default_thread_count(int omp_num_threads, int process_cpus, int machine_cpus,
                         int local_processes);
}  // namespace detail

/// Runs fn(begin, end) over [0, n) in at most min(num_threads(), ceil(n / grain))
/// contiguous chunks of about n / chunks items each, run in parallel; one call fn(0, n)
/// on this thread when n <= grain or with one thread, none when n <= 0. An exception that
/// fn throws in any chunk is rethrown on the calling thread once every chunk has finished
/// (the lowest chunk's when several throw).
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn);

}  // namespace zt

#include "core/parallel_impl.h"
