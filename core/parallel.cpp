// Thread counts: per calling thread, applied to OpenMP regions and to OpenBLAS.
#include "core/parallel.h"

#include <cblas.h>

#include <thread>

namespace zt {

static int& thread_count() {
  thread_local int n = 0;  // 0: not set on this thread
  return n;
}
static int g_default_threads = 0;

int hardware_threads() {
  unsigned h = std::thread::hardware_concurrency();
  return h == 0 ? 1 : static_cast<int>(h);
}

int num_threads() {
  int n = thread_count();
  if (n > 0) return n;
  return g_default_threads > 0 ? g_default_threads : hardware_threads();
}

void set_num_threads(int n) {
  thread_count() = n < 1 ? 1 : n;
  openblas_set_num_threads(thread_count());
}

}  // namespace zt
