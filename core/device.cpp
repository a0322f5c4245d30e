// Device parsing; CUDA queries answer "none" in a build without CUDA.
#include "core/device.h"

#include <atomic>

#include "core/error.h"

namespace zt {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      return cuda(std::stoi(s.substr(5)));
    } catch (...) {
    }
  }
  ZT_FAIL("unknown device '", s, "': expected cpu, cuda or cuda:N");
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
