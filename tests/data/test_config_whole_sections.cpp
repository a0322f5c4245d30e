// Edge cases of the config front ends: an override that empties a section whole. Each
// says what happened in the user's own terms.
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "configs/app_config.h"

namespace zt::config {
namespace {

// `--set train={}` replaces the file's train section with an empty one, as any mapping set
// whole does: the keys the file gave go back to their defaults, which a warning names.
TEST(Config, AnOverrideWithAnEmptyMappingNamesTheKeysItDrops) {
  const std::string path = test::write_temp_file("zt_config_whole", "empty", "w.yaml",
                                                 "train:\n  steps: 10\n  lr: 2.0e-3\n");
  for (const char* value : {"{}", "{ }"}) {
    const std::string set = std::string("train=") + value;
    AppConfig c = load_app_config(path, {{set, "--set " + set}});
    EXPECT_EQ(c.train.steps, TrainConfig{}.steps) << "YAML's rule: the section is replaced";
    ASSERT_EQ(c.warnings.size(), 1u) << value;
    EXPECT_EQ(c.warnings[0], "--set " + set + " sets all of train: the keys " + path +
                                 ":1 gives it (steps, lr) go back to their defaults (to change "
                                 "one key, --set train.<key>=...)");
  }
}

}  // namespace
}  // namespace zt::config
