// Per-thread work counters (core/work_counts.h).
#include "core/work_counts.h"

namespace zt {

namespace detail {
WorkCounts& thread_work_counts() {
  thread_local WorkCounts counts;
  return counts;
}
}  // namespace detail

WorkCounts work_counts() {
  return detail::thread_work_counts();
}

}  // namespace zt
