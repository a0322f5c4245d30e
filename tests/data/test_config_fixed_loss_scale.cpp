// A fixed fp16 loss scale (fp16.loss_scale > 0) never moves: the dynamic scaler's keys
// (initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis,
// min_loss_scale) then do nothing, as in DeepSpeed, and each warns, naming its line, as
// the fp16 keys do where fp16 is off. With a dynamic scale (loss_scale 0) they are quiet.
#include <gtest/gtest.h>

#include "configs/app_config.h"
#include "configs/config.h"

namespace zt::config {
namespace {

TEST(Config, DynamicScaleKeysBesideAFixedLossScaleWarn) {
  const AppConfig fixed = parse_app_config(
      parse_yaml("fp16:\n  enabled: true\n  loss_scale: 128\n  initial_scale_power: 8\n"
                 "  hysteresis: 4\n",
                 "f.yaml"));
  ASSERT_EQ(fixed.warnings.size(), 2u);
  EXPECT_EQ(fixed.warnings[0],
            "f.yaml:4: fp16.initial_scale_power has no effect: fp16.loss_scale fixes the scale "
            "at 128 (0 makes it dynamic)");
  EXPECT_EQ(fixed.warnings[1].rfind("f.yaml:5: fp16.hysteresis has no effect", 0), 0u)
      << fixed.warnings[1];
  const AppConfig dynamic = parse_app_config(
      parse_yaml("fp16:\n  enabled: true\n  loss_scale: 0\n  initial_scale_power: 8\n"
                 "  hysteresis: 4\n  loss_scale_window: 50\n  min_loss_scale: 2\n",
                 "d.yaml"));
  EXPECT_TRUE(dynamic.warnings.empty());
}

}  // namespace
}  // namespace zt::config
