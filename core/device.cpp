// Device parsing; CUDA queries answer "none" in a build without CUDA.
#include "core/device.h"

#include <atomic>
#include <charconv>

#include "core/error.h"

namespace zt {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    // The whole rest is the index, digits only: stoi would take "1x" as 1 and "-1" (which
    // the CUDA layer reads as the current device).
    const char* first = s.data() + 5;
    const char* last = s.data() + s.size();
    int i = -1;
    const auto [end, ec] = std::from_chars(first, last, i);
    if (first != last && *first != '-' && ec == std::errc() && end == last && i < kMaxCudaDevices)
      return cuda(i);
  }
  ZT_FAIL("unknown device '", s, "': expected cpu, cuda or cuda:N (N from 0 to ",
          kMaxCudaDevices - 1, ")");
}

namespace {
std::atomic<bool> g_tf32_matmul{false}, g_tf32_conv{false};
}  // namespace

void set_tf32(Tf32Policy policy) {
  g_tf32_matmul.store(policy.matmul);
  g_tf32_conv.store(policy.conv);
}

Tf32Policy tf32() {
  return {g_tf32_matmul.load(), g_tf32_conv.load()};
}

#ifndef ZT_WITH_CUDA
bool cuda_available() {
  return false;
}
int cuda_device_count() {
  return 0;
}
bool graph_capturing() {
  return false;
}
#endif

}  // namespace zt
