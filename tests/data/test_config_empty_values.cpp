// A value that is only a YAML tag or anchor (lr: !!float, lr: &a) gives no value; the error
// says what was found there, not just that nothing was.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "configs/app_config.h"

namespace zt::config {
namespace {

std::string error_for(const std::string& name, const std::string& yaml) {
  const std::string path = test::write_temp_file("zt_config_empty", name, "bad.yaml", yaml);
  return test::error_of([&] { load_app_config(path); });
}

TEST(ConfigEmptyValues, ATagAloneIsNamed) {
  const std::string msg = error_for("tag", "train:\n  steps: 10\n  lr: !!float\n");
  EXPECT_NE(msg.find("bad.yaml:3: train.lr: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("the tag '!!float'"), std::string::npos) << msg;
}

TEST(ConfigEmptyValues, AnAnchorAloneIsNamed) {
  const std::string msg = error_for("anchor", "train:\n  steps: 10\n  lr: &a\n");
  EXPECT_NE(msg.find("bad.yaml:3: train.lr: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("the anchor '&a'"), std::string::npos) << msg;
}

TEST(ConfigEmptyValues, ATagAndAnAnchorAreNamedInASection) {
  const std::string msg = error_for("both", "train: &t !!map\n");
  EXPECT_NE(msg.find("bad.yaml:1: train: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("the anchor '&t'"), std::string::npos) << msg;
}

// An alias of an anchor with no value has no value either, but is no anchor itself.
TEST(ConfigEmptyValues, AnAliasIsNotTakenForItsAnchor) {
  const std::string msg = error_for("alias", "x: &a\ntrain:\n  steps: 10\n  lr: *a\n");
  EXPECT_NE(msg.find("bad.yaml:4: train.lr: the key has no value; give one"), std::string::npos)
      << msg;
}

// In a list, where Section's own check does not reach.
TEST(ConfigEmptyValues, ATagAloneInAListIsNamed) {
  const std::string msg = error_for("list", "train:\n  steps: 10\n  betas: [!!float , 0.9]\n");
  EXPECT_NE(msg.find("train.betas.0: expected a single value, got only the tag '!!float'"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace zt::config
