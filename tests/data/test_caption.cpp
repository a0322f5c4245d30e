// Captions (data/caption.h): the band holds the text in the 3x5 font, wrapped to the
// image's width; stack_images puts images one above the other.
#include <gtest/gtest.h>

#include "data/caption.h"

using namespace zt;

namespace {

data::Image solid(int64_t h, int64_t w, uint8_t v) {
  data::Image im;
  im.height = h;
  im.width = w;
  im.rgb.assign(static_cast<size_t>(h * w * 3), v);
  return im;
}

// White pixels in rows [y0, y1).
int64_t white_in(const data::Image& im, int64_t y0, int64_t y1) {
  int64_t n = 0;
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = 0; x < im.width; ++x)
      n += im.rgb[static_cast<size_t>((y * im.width + x) * 3)] == 255;
  return n;
}

}  // namespace

TEST(Caption, OneLineAtScaleOneKeepsTheImageBelow) {
  const data::Image im = solid(10, 40, 100);
  const data::Image c = data::with_caption(im, "I", 1);
  // One line: 7 rows of text plus one, at scale 1.
  ASSERT_EQ(c.height, 10 + 8);
  ASSERT_EQ(c.width, 40);
  // 'I' is 3 + 1 + 1 + 1 + 3 = 9 pixels.
  EXPECT_EQ(white_in(c, 0, 8), 9);
  for (int64_t y = 8; y < c.height; ++y)
    EXPECT_EQ(c.rgb[static_cast<size_t>((y * c.width + 5) * 3)], 100) << "row " << y;
}

TEST(Caption, WrapsWordsAndMarksUnknownCharacters) {
  const data::Image im = solid(4, 4 * 5 + 2, 0);  // five characters per line at scale 1
  const data::Image two = data::with_caption(im, "ABC DEF", 1);
  EXPECT_EQ(two.height, 4 + 2 * 7 + 1) << "'ABC DEF' does not fit in 5 columns: two lines";
  const data::Image q = data::with_caption(im, "~", 1), mark = data::with_caption(im, "?", 1);
  EXPECT_EQ(q.rgb, mark.rgb) << "a character the font lacks prints as '?'";
  EXPECT_EQ(data::with_caption(im, "abc", 1).rgb, data::with_caption(im, "ABC", 1).rgb);
}

TEST(Caption, ScaleTwoWhenWide) {
  const data::Image c = data::with_caption(solid(2, 200, 0), "I");
  EXPECT_EQ(c.height, 2 + 16);
  EXPECT_EQ(white_in(c, 0, 16), 9 * 4);
}

TEST(Caption, StackImages) {
  const data::Image s = data::stack_images({solid(3, 5, 10), solid(2, 8, 20)});
  ASSERT_EQ(s.height, 5);
  ASSERT_EQ(s.width, 8);
  EXPECT_EQ(s.rgb[0], 10);
  EXPECT_EQ(s.rgb[static_cast<size_t>((0 * 8 + 6) * 3)], 128) << "grey beside the narrower one";
  EXPECT_EQ(s.rgb[static_cast<size_t>((4 * 8 + 7) * 3)], 20);
}
