// Thread counts: per calling thread, applied to OpenMP regions and (cpu/blas.h) to OpenBLAS.
#include "core/parallel.h"

#include <cstdlib>
#include <thread>

namespace zt {

static int& thread_count() {
  thread_local int n = 0;  // 0: not set on this thread
  return n;
}
// The default for threads that never called set_num_threads: $OMP_NUM_THREADS when it is
// a positive number (as OpenMP programs and PyTorch honour it), else every core.
static int default_threads() {
  static const int n = [] {
    const char* e = std::getenv("OMP_NUM_THREADS");
    const int v = e ? std::atoi(e) : 0;
    return v > 0 ? v : hardware_threads();
  }();
  return n;
}

int hardware_threads() {
  unsigned h = std::thread::hardware_concurrency();
  return h == 0 ? 1 : static_cast<int>(h);
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
