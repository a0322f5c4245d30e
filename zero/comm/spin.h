// Bounded spinning for the shared-memory rendezvous: a peer thread usually arrives within
// microseconds, far sooner than a condition variable wakes a sleeper (tens of
// microseconds), so waits first poll for a short while and only then block.
#pragma once

#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace zt::comm {

/// How long a wait polls before it blocks.
inline constexpr std::chrono::microseconds kSpinBudget{50};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

/// Polls `ready()` for up to kSpinBudget (pausing, then yielding the core to the thread
/// we wait for when cores are oversubscribed). Returns whether it became true.
template <typename Ready>
bool spin_until(Ready ready) {
  for (int i = 0; i < 64; ++i) {
    if (ready()) return true;
    cpu_relax();
  }
  const auto end = std::chrono::steady_clock::now() + kSpinBudget;
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::yield();
  }
  return ready();
}

}  // namespace zt::comm
