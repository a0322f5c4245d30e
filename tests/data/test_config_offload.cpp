// offload_optimizer's settings of the offload itself (pin_memory, ratio) do nothing while its
// device is none, DeepSpeed's default: a section that gives them without `device: cpu` (a
// user who took pin_memory for the switch) is told so where they are written.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "configs/app_config.h"

namespace zt::config {
namespace {

TEST(ConfigOffload, SettingsOfAnOffloadThatIsOffWarn) {
  const AppConfig c = parse_app_config(
      parse_yaml("zero_optimization:\n  offload_optimizer:\n    pin_memory: true\n    ratio: 0.5\n",
                 "o.yaml"));
  EXPECT_FALSE(c.zero.offload_optimizer.enabled());
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_NE(c.warnings[0].find("o.yaml:3: zero_optimization.offload_optimizer.pin_memory: has no "
                               "effect with offload_optimizer.device none"),
            std::string::npos)
      << c.warnings[0];
  EXPECT_NE(c.warnings[0].find("device: cpu"), std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[1].find("o.yaml:4: zero_optimization.offload_optimizer.ratio: has no "
                               "effect with offload_optimizer.device none"),
            std::string::npos)
      << c.warnings[1];
  // What the offload does when off anyway is no news.
  const AppConfig quiet = parse_app_config(parse_yaml(
      "zero_optimization:\n  offload_optimizer: {device: none, pin_memory: false, ratio: 1.0}\n"));
  EXPECT_TRUE(quiet.warnings.empty());
}

}  // namespace
}  // namespace zt::config
