// An image folder at a fixed size takes data.fit: crop scales an image to cover the size and
// keeps its middle; stretch scales each side on its own, so the whole image shows.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/data_test_util.h"
#include "data/factory.h"
#include "data/image.h"

namespace fs = std::filesystem;

namespace zt::data {
namespace {

using datatest::temp_dir;

// An 8 x 16 image, black but for its middle 8 columns, white.
Image white_middle() {
  Image img;
  img.height = 8;
  img.width = 16;
  img.rgb.assign(8 * 16 * 3, 0);
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 4; x < 12; ++x)
      for (int64_t c = 0; c < 3; ++c) img.rgb[static_cast<size_t>((y * 16 + x) * 3 + c)] = 255;
  return img;
}

TEST(ImageFolderFit, CropKeepsTheMiddleAndStretchKeepsTheWholeImage) {
  const std::string d = temp_dir();
  fs::create_directories(d + "/set");
  save_png(d + "/set/a.png", white_middle());
  DataConfig cfg;
  cfg.kind = DataKind::image_folder;
  cfg.path = d + "/set";
  cfg.frames = 1;
  cfg.height = cfg.width = 8;

  cfg.fit = Fit::crop;  // the 8 x 8 middle: white throughout
  const std::vector<double> crop = make_dataset(cfg)->get(0).clip.to_vector();
  ASSERT_EQ(crop.size(), 3u * 8 * 8);
  for (size_t i = 0; i < crop.size(); ++i) EXPECT_NEAR(crop[i], 1.0, 0.02) << "value " << i;

  cfg.fit = Fit::stretch;  // the black sides squeezed in: dark at the left and right edges
  const std::vector<double> stretch = make_dataset(cfg)->get(0).clip.to_vector();
  ASSERT_EQ(stretch.size(), 3u * 8 * 8);
  for (int64_t y = 0; y < 8; ++y) {
    EXPECT_LT(stretch[static_cast<size_t>(y * 8)], 0.0) << "row " << y << ", left";
    EXPECT_LT(stretch[static_cast<size_t>(y * 8 + 7)], 0.0) << "row " << y << ", right";
    EXPECT_GT(stretch[static_cast<size_t>(y * 8 + 4)], 0.5) << "row " << y << ", middle";
  }
}

}  // namespace
}  // namespace zt::data
