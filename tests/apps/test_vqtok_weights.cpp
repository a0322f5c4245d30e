// Where vqtok's inference finds no weights, the error says where it looked and why: the
// path --weights named, or without it the run's checkpoints, which training writes.
#include <gtest/gtest.h>

#include "apps/app_test_util.h"
#include "apps/vqtok/vqtok_app.h"
#include "common/test_util.h"

using namespace zt;

TEST(VqtokWeights, MissingWeightsSayWhereTheyWereLookedFor) {
  const std::string dir = apptest::fresh_dir("zt_vqtok_weights", "missing");
  const config::AppConfig cfg = apptest::tiny_vqtok_config(dir);
  std::string by_default, named;
  comm::run_threads(1, [&](comm::Communicator& comm) {
    by_default = test::error_of([&] { vqtok::load_frozen_model(cfg, "", comm); });
    named = test::error_of([&] { vqtok::load_frozen_model(cfg, dir + "/w.safetensors", comm); });
  });
  EXPECT_NE(by_default.find("(no --weights given: the run's output_dir/checkpoints); train first "
                            "(vqtok train --config ...), or pass --weights"),
            std::string::npos)
      << by_default;
  EXPECT_NE(named.find("no weights at '" + dir + "/w.safetensors'; pass --weights with"),
            std::string::npos)
      << named;
  EXPECT_EQ(named.find("train first"), std::string::npos) << named;
}
