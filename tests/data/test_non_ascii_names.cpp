// Names with bytes past ASCII (UTF-8 text) go through zt's lowercasing byte for byte: ASCII
// letters are lowered, every other byte is kept as it is. A file's extension keeps its
// accented letters; a DeepSpeed optimizer type so spelled is refused, quoted as given.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "configs/app_config.h"
#include "data/image_folder.h"

namespace zt {
namespace {

TEST(NonAsciiNames, AnExtensionIsLoweredByteForByte) {
  EXPECT_EQ(data::extension_of("photos/IMG_1.PNG"), ".png");
  EXPECT_EQ(data::extension_of("photos/caf\xC3\x89.JP\xC3\x89G"), ".jp\xC3\x89g");
}

TEST(NonAsciiNames, ADeepSpeedOptimizerTypeIsQuotedAsGiven) {
  const std::string ds = test::write_temp_file("zt_non_ascii", "optimizer", "ds.json",
                                               R"({"optimizer": {"type": "Ad\u00c4m"}})");
  const std::string y =
      test::write_temp_file("zt_non_ascii", "optimizer", "run.yaml", "deepspeed_config: " + ds);
  const std::string msg = test::error_of([&] { config::load_app_config(y, {}); });
  EXPECT_NE(msg.find("optimizer.type: optimizer 'Ad\xC3\x84m' is not supported by zt"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace zt
