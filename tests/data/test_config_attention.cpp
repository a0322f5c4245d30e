// train.flash_backward sets the fused attention kernels' backward: a config where no fused
// kernel runs (attention math, or auto on the CPU) warns that it has no effect.
#include <gtest/gtest.h>

#include <string>

#include "configs/app_config.h"
#include "configs/config.h"

namespace zt::config {
namespace {

std::vector<std::string> training_warnings(const std::string& train) {
  return parse_app_config(parse_yaml("train:\n" + train + "  flash_backward: atomic\n", "a.yaml"))
      .training_warnings;
}

TEST(Config, FlashBackwardWithoutFusedAttentionWarns) {
  auto warns = [](const std::string& train, const std::string& line, const std::string& why) {
    const std::vector<std::string> w = training_warnings(train);
    ASSERT_EQ(w.size(), 1u) << train;
    const std::string want = "a.yaml:" + line + ": train.flash_backward has no effect with " + why +
                             " (it sets the fused attention kernels' backward";
    EXPECT_EQ(w[0].rfind(want, 0), 0u) << w[0];
  };
  warns("  attention: auto\n", "3", "train.attention auto on device cpu");
  warns("  device: cuda\n  attention: math\n", "4", "train.attention math");
  // Where the fused kernels can run, or ZT_ATTENTION may pick them, it applies.
  for (const char* applies :
       {"  attention: flash\n", "  device: cuda\n  attention: auto\n", "  device: cuda\n", ""})
    EXPECT_TRUE(training_warnings(applies).empty()) << applies;
}

}  // namespace
}  // namespace zt::config
