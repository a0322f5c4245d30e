// Thread counts: per calling thread, applied to OpenMP regions (BLAS runs inside them,
// cpu/blas.h), and the default count.
#include "core/parallel.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace zt {

namespace {

int& thread_count() {
  thread_local int n = 0;  // 0: not set on this thread
  return n;
}

// A positive integer from the environment, or 0.
int env_count(const char* name) {
  const char* e = std::getenv(name);
  const int v = e ? std::atoi(e) : 0;
  return v > 0 ? v : 0;
}

// Processes on this node as the launcher tells them (Open MPI, MPICH/Hydra, PMIx), or 1.
int local_processes() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMIX_LOCAL_SIZE"})
    if (int n = env_count(name)) return n;
  return 1;
}

int machine_cpus() {
  const unsigned h = std::thread::hardware_concurrency();
  return h == 0 ? 1 : static_cast<int>(h);
}

// The default for threads that never called set_num_threads (default_thread_count).
int default_threads() {
  static const int n = detail::default_thread_count(
      env_count("OMP_NUM_THREADS"), hardware_threads(), machine_cpus(), local_processes());
  return n;
}

}  // namespace

namespace detail {

int default_thread_count(int omp_num_threads, int process_cpus, int machine_cpus,
                         int local_processes) {
  if (omp_num_threads > 0) return omp_num_threads;
  // A launcher that pinned the process gave it its own cores; an unpinned process shares
  // the machine's with the other processes on the node.
  const bool pinned = process_cpus < machine_cpus;
  const int share = pinned ? process_cpus : process_cpus / std::max(local_processes, 1);
  return std::max(share, 1);
}

}  // namespace detail

int hardware_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return machine_cpus();
}

int num_threads() {
  int n = thread_count();
  if (n > 0) return n;
  return default_threads();
}

void set_num_threads(int n) {
  thread_count() = n < 1 ? 1 : n;
}

}  // namespace zt
