// Where the host's time goes inside the GPU libraries. Every CUDA runtime, cuBLAS(Lt),
// cuDNN and NCCL call that zt checks (CUDA_CHECK and its kin, core/cuda/check.h) or wraps
// in ZT_API is one call site; while an ApiProfile lives anywhere in the process, each
// site counts its calls and sums the host time spent inside them. A host-bound step (small
// kernels, a training step waiting on its launches) shows here which library calls cost
// it: cuDNN's and cuBLAS's own calls (which launch their kernels), but also descriptor
// setup, event records, copies, allocations and the first call of a shape (cuDNN's
// algorithm queries). zt's own kernels launched with <<<>>> are not sites: KernelProfile's
// host time covers those.
// Outside a profile a site costs one relaxed load. Set ZT_API_PROFILE=1 to profile a whole
// process: the table goes to stderr at exit (any program, e.g. a training run's first step).
// Pure C++: the CUDA headers are not needed to include it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zt {

namespace detail {
/// One call site: its call text, where it is, and its totals while profiled.
struct ApiSite {
  ApiSite(const char* call, const char* file, int line);  // registers the site
  const char* call;
  const char* file;
  int line;
  std::atomic<int64_t> calls{0}, ns{0};
};

/// Open profiles (ZT_API_PROFILE=1 holds one for the whole process).
extern std::atomic<int> g_api_profiles;
int64_t api_clock_ns();

/// Counts a call in the thread's WorkCounts, and times it at its site while profiled.
class ApiClock {
 public:
  explicit ApiClock(ApiSite& site);
  ~ApiClock() {
    if (t0_ >= 0) {
      site_.calls.fetch_add(1, std::memory_order_relaxed);
      site_.ns.fetch_add(api_clock_ns() - t0_, std::memory_order_relaxed);
    }
  }
  ApiClock(const ApiClock&) = delete;
  ApiClock& operator=(const ApiClock&) = delete;

 private:
  ApiSite& site_;
  int64_t t0_ = -1;
};
}  // namespace detail

/// Times every call site from construction to sites(); profiles may overlap (each sees
/// the calls made while it lived).
class ApiProfile {
 public:
  struct Site {
    std::string call;   ///< the function called: "cudaEventRecord"
    std::string where;  ///< its call site, "stream.cpp:40"
    int64_t calls = 0;
    double host_ms = 0;  ///< summed host time inside the calls
  };

  ApiProfile();
  ~ApiProfile();
  ApiProfile(const ApiProfile&) = delete;
  ApiProfile& operator=(const ApiProfile&) = delete;

  /// The sites called since construction, most host time first.
  std::vector<Site> sites() const;

 private:
  std::vector<std::pair<int64_t, int64_t>> start_;  // each registered site's calls, ns
};

}  // namespace zt

/// `call`'s value; the call counts and is timed at its own site (core/api_profile.h).
#define ZT_API(call)                                                      \
  ([&]() -> decltype(auto) {                                              \
    static ::zt::detail::ApiSite zt_api_site_(#call, __FILE__, __LINE__); \
    ::zt::detail::ApiClock zt_api_clock_(zt_api_site_);                   \
    return call;                                                          \
  }())
