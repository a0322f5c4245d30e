// train.keep_checkpoints says how many checkpoints a run keeps; with checkpoint_every 0 it
// writes none, and the key, which then changes nothing, is named where it is written.
#include <gtest/gtest.h>

#include "configs/app_config.h"

namespace zt::config {
namespace {

TEST(ConfigCheckpointKeys, KeepCheckpointsWithoutCheckpointsWarns) {
  const AppConfig c = parse_app_config(
      parse_yaml("train:\n  checkpoint_every: 0\n  keep_checkpoints: 5\n", "k.yaml"));
  ASSERT_EQ(c.training_warnings.size(), 1u);
  EXPECT_NE(c.training_warnings[0].find("k.yaml:3: train.keep_checkpoints has no effect with "
                                        "train.checkpoint_every 0"),
            std::string::npos)
      << c.training_warnings[0];
  const AppConfig saving = parse_app_config(
      parse_yaml("train:\n  checkpoint_every: 10\n  keep_checkpoints: 5\n", "k.yaml"));
  EXPECT_TRUE(saving.training_warnings.empty());
}

}  // namespace
}  // namespace zt::config
