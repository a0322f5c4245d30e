// Tests that need a GPU skip where none is visible, saying why; with ZT_REQUIRE_GPU=1 in
// the environment (tools/gpu_check.sh sets it for its test steps) they fail instead, so a
// run on a GPU machine whose GPU the tests cannot reach does not pass on skips.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/device.h"

namespace zt::test {

/// Whether ZT_REQUIRE_GPU is set to 1: a missing GPU is then a test failure.
inline bool gpu_required() {
  const char* v = std::getenv("ZT_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace zt::test

/// Skips the test where no GPU is visible, with "no CUDA device: " and `why` (anything
/// that streams into a gtest message); under ZT_REQUIRE_GPU=1 fails it with the same words.
#define ZT_GPU_OR_SKIP(why)                                                            \
  if (::zt::cuda_available()) {                                                        \
  } else if (::zt::test::gpu_required())                                               \
    FAIL() << "ZT_REQUIRE_GPU=1, but no CUDA device: " << why                          \
           << " (unset ZT_REQUIRE_GPU to let tests that need a GPU skip without one)"; \
  else                                                                                 \
    GTEST_SKIP() << "no CUDA device: " << why
