// Writing PNGs: stb_image_write sizes its buffers in int, so an image whose rows pass about
// 2^31 bytes would overflow them (undefined behaviour, a heap overrun, as a sample sheet of
// 1024 large images would be). encode_png refuses such an image by its size, naming it,
// before stb sees it.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "data/image.h"

namespace zt::data {
namespace {

std::string error_of(const Image& img) {
  try {
    encode_png(img);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PngWrite, AnImageTooLargeForTheEncoderIsRefusedByItsSize) {
  // 40000 x 40000: 4.8e9 bytes of rows, past int. The buffer is left empty: the size is
  // checked first.
  const std::string err = error_of(Image{40000, 40000, {}});
  EXPECT_NE(err.find("a 40000x40000 image is too large to write as a PNG"), std::string::npos)
      << err;
  // 2^30 bytes of rows exactly is within the limit: only the missing buffer is an error.
  const int64_t w = 1365, h = (int64_t{1} << 30) / (3 * w + 1);
  ASSERT_EQ((3 * w + 1) * h, int64_t{1} << 30);
  EXPECT_NE(error_of(Image{h, w, {}}).find("the buffer holds 0 bytes"), std::string::npos);
  EXPECT_NE(error_of(Image{h + 1, w, {}}).find("too large"), std::string::npos);
}

}  // namespace
}  // namespace zt::data
