// OpenMP implementation of parallel_for.
#pragma once

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>

namespace zt {

template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  int nt = num_threads();
  if (nt <= 1 || n <= grain) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(nt, (n + grain - 1) / grain);
  // An exception must not leave the OpenMP region (it would end the process): each chunk
  // catches its own, and the lowest chunk's is rethrown here once every chunk has finished,
  // so the caller sees the same error whatever the scheduling.
  std::mutex error_mutex;
  int64_t error_chunk = chunks;
  std::exception_ptr error;
// The formatter would break the cast inside the pragma.
// clang-format off
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static)
  // clang-format on
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b >= e) continue;
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (c < error_chunk) {
        error_chunk = c;
        error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace zt
