// Edge cases of the config front ends: an override that empties a section whole, and an
// empty DeepSpeed config. Each says what happened in the user's own terms.
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "configs/app_config.h"
#include "configs/deepspeed.h"

namespace zt::config {
namespace {

using test::error_of;

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

// An empty DeepSpeed JSON is named as one: no advice to start from a zt YAML config.
TEST(Config, AnEmptyDeepSpeedConfigIsNamedAsOne) {
  for (const char* text : {"", "{}", "// nothing yet\n"}) {
    const std::string msg = error_of([&] { parse_deepspeed_text(text, "ds_config.json"); });
    EXPECT_NE(msg.find("ds_config.json: the DeepSpeed config is empty"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("vqtok_tiny.yaml"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace zt::config
