// $ZT_CONV_PATH, which forces one CPU convolution algorithm: the three names parse, an
// empty value is unset (as with every ZT_* switch), and any other value is a zt::Error
// naming the variable and the valid values, raised on the calling thread even when the
// convolution's batch is split over two threads. The process reads the variable once, at
// its first convolution, so the end-to-end checks run in a child process of their own (a
// death test in the "threadsafe" style re-runs just that test in a fresh process), whose
// environment alone they change.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/test_util.h"
#include "core/conv_reference.h"
#include "core/cpu/conv_path.h"
#include "core/kernels.h"

using namespace zt;
using cpu::ConvPath;
using cpu::parse_conv_path;

namespace {

// A convolution large enough (about 19 MFLOP) that two threads split its batch into two
// groups, each choosing its path on its own thread: 8 x 32 -> 32 channels, "same" 3x3 on
// 16 x 16.
ConvGeometry threaded_geometry() {
  ConvGeometry g;
  g.n = 8;
  g.c = g.o = 32;
  g.h = g.oh = g.w = g.ow = 16;
  g.kh = g.kw = 3;
  g.pad_h = g.pad_w = 1;
  return g;
}

// In this (child) process, with $ZT_CONV_PATH = value, on two threads: conv2d and its
// gradients, then the backward kernel called directly (a bad value fails the forward, so
// the backward is only reached that way). Prints each zt::Error and exits with the number
// caught; anything else escaping aborts.
[[noreturn]] void conv_with_path_env(const char* value) {
  ::setenv("ZT_CONV_PATH", value, 1);
  test::ThreadCount two(2);
  const ConvGeometry g = threaded_geometry();
  Generator gen(5);
  Tensor x = randn({g.n, g.c, g.h, g.w}, gen), w = randn({g.o, g.c, g.kh, g.kw}, gen);
  Tensor go = randn({g.n, g.o, g.oh, g.ow}, gen);
  int caught = 0;
  try {
    Conv2dArgs a;
    a.padding = {1, 1, 1, 1};
    Tensor xl = x.clone().set_requires_grad(true), wl = w.clone().set_requires_grad(true);
    conv2d(xl, wl, Tensor(), a).backward(go);
  } catch (const Error& e) {
    std::fprintf(stderr, "conv2d: %s\n", e.what());
    ++caught;
  }
  try {
    cpu::conv_backward(g, go, x, w, zeros_like(x), zeros_like(w), Tensor());
  } catch (const Error& e) {
    std::fprintf(stderr, "conv_backward: %s\n", e.what());
    ++caught;
  }
  std::exit(caught);
}

// In this (child) process, with $ZT_CONV_PATH = value: exits with 0 when conv2d on the
// geometry above (a "same" 3x3 that Winograd applies to, the automatic choice there) gives
// the Winograd kernels' bits, and with 1 when it gives other ones (another path).
[[noreturn]] void exit_0_if_winograd_ran(const char* value) {
  ::setenv("ZT_CONV_PATH", value, 1);
  const ConvGeometry g = threaded_geometry();
  Generator gen(6);
  const Tensor x = randn({g.n, g.c, g.h, g.w}, gen), w = randn({g.o, g.c, g.kh, g.kw}, gen);
  Conv2dArgs a;
  a.padding = {1, 1, 1, 1};
  const Tensor y = conv2d(x, w, Tensor(), a);
  const Tensor winograd = test::winograd_kernels(g, x, w, Tensor(), y.sizes())[0];
  std::exit(test::all_close(y, winograd, 0.0, 0.0) ? 0 : 1);
}

}  // namespace

TEST(ConvPathEnv, ParsesThePathNamesAndTreatsEmptyAsUnset) {
  EXPECT_EQ(parse_conv_path(nullptr), std::nullopt);
  EXPECT_EQ(parse_conv_path(""), std::nullopt);
  EXPECT_EQ(parse_conv_path("winograd"), ConvPath::kWinograd);
  EXPECT_EQ(parse_conv_path("planes"), ConvPath::kPlanes);
  EXPECT_EQ(parse_conv_path("columns"), ConvPath::kColumns);
  for (const char* bad : {"bogus", "Planes", " columns", "0"}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(test::throws_with([&] { parse_conv_path(bad); },
                                  std::string("ZT_CONV_PATH='") + bad + "' is not a convolution"));
    EXPECT_TRUE(test::throws_with([&] { parse_conv_path(bad); },
                                  "use winograd, planes or columns, or leave it unset"));
  }
}

TEST(ConvPathEnv, ABadValueIsAnErrorOnTheCallingThreadOfAThreadedConv) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string message =
      "ZT_CONV_PATH='bogus' is not a convolution path: use winograd, planes or columns, or "
      "leave it unset";
  EXPECT_EXIT(conv_with_path_env("bogus"), ::testing::ExitedWithCode(2),
              "conv2d: .*" + message + ".*conv_backward: .*" + message);
}

TEST(ConvPathEnv, AnEmptyValueLeavesTheChoiceAutomatic) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(conv_with_path_env(""), ::testing::ExitedWithCode(0), "");
  // The automatic choice takes Winograd where it applies; a value that forces another path
  // does not, which shows the check can tell.
  EXPECT_EXIT(exit_0_if_winograd_ran(""), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(exit_0_if_winograd_ran("columns"), ::testing::ExitedWithCode(1), "");
}
