// Resizing equals Pillow's Image.resize (BICUBIC, BILINEAR) byte for byte: against bytes
// Pillow produced for small images (up, down by non-integer factors, one axis up and the
// other down, either pass order, one axis unchanged, sizes of 1), and, without
// references, a constant image stays that constant at every size (weights cut at the
// edges are renormalized).
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "common/test_util.h"
#include "core/error.h"
#include "data/image.h"
#include "data/resample.h"

namespace zt::data {
namespace {

// The test pattern, also written in the Python below: steep ramps that wrap from 255 to 0,
// so bicubic over- and undershoots are clipped.
Image pattern(int64_t height, int64_t width) {
  Image img{height, width, {}};
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < 3; ++c)
        img.rgb.push_back(static_cast<uint8_t>((x * 71 + y * 113 + c * 47 + x * y * 29) % 256));
  return img;
}

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::strtoul(hex.substr(i, 2).c_str(), nullptr, 16)));
  return out;
}

// "" when equal; otherwise the first mismatches (y, x, channel) and the largest difference.
std::string compare(const Image& got, const std::vector<uint8_t>& want) {
  if (got.rgb == want) return "";
  std::ostringstream s;
  if (got.rgb.size() != want.size()) {
    s << got.rgb.size() << " bytes, want " << want.size();
    return s.str();
  }
  int shown = 0, largest = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const int d = std::abs(got.rgb[i] - want[i]);
    largest = std::max(largest, d);
    if (d > 0 && shown++ < 5) {
      const auto px = static_cast<int64_t>(i / 3);
      s << "(" << px / got.width << ", " << px % got.width << ", " << i % 3
        << "): " << int{got.rgb[i]} << " want " << int{want[i]} << "; ";
    }
  }
  s << "largest difference " << largest;
  return s.str();
}

struct PillowCase {
  int64_t height, width, out_height, out_width;
  Filter filter;
  const char* hex;  // the expected HWC bytes
};

// Made with Pillow 13.0.0 and numpy 2.4.6 on x86-64:
//
//   import numpy as np
//   from PIL import Image
//   def source(h, w):
//       y, x, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing="ij")
//       return Image.fromarray(((x * 71 + y * 113 + c * 47 + x * y * 29) % 256).astype(np.uint8))
//   CASES = [(5, 7, 9, 11), (5, 7, 3, 4), (5, 7, 8, 3), (5, 7, 1, 1),
//            (9, 5, 4, 12), (9, 5, 2, 4), (9, 5, 9, 2), (9, 5, 1, 5), (1, 6, 4, 3)]
//   for name, f in (("bicubic", Image.BICUBIC), ("bilinear", Image.BILINEAR)):
//       for h, w, oh, ow in CASES:
//           print(name, h, w, oh, ow, np.asarray(source(h, w).resize((ow, oh), f)).tobytes().hex())
//
// 9x5 -> 4x12 and 9x5 -> 2x4 lose more than twice as many rows as columns, so Pillow
// filters their height first.
const PillowCase kPillowCases[] = {
    {5, 7, 9, 11, Filter::bicubic,
     "001f4e0f48774287b67ec6f5bb80afda00235a21501f61975c8cc48ebd57acdb00195382404e7d745786"
     "6d9ccb958bbac73d6c48386711548a5b8bc496c95eb7ef075ca8d7985988c9063556507f5899c8a4bfee"
     "2f5e8d033c735a8ac3a3d86bccff18b26796ae5584a33d6c892b5a816b9984c5f46e4d865e2665618dc3"
     "b19d76ee982aeb0837a64d7c668fbecc2a59be3a696594c3bf3b6acf2d5c6a93c2ac5382f10e3d8c4183"
     "9e457eb85280cb6d9b8d76ac3475a4ae8c4fd69e52709cc1624f8d67114f4b97b19b5c7fef2c5ba7a0d0"
     "5f9fda3a55849dcc35c0f94773a3c1275c99003362a0de46a6b4779e81b65a89bd6d629dbc3261c3b21d"
     "a7eb3a72a2c13569a6104877d4ff08ace5726eb3eb3079b0783d77ff1f4ed9a0119add3371a1c14170ad"
     "245382"},
    {5, 7, 3, 4, Filter::bicubic,
     "5155848d77a64c4e8b8fc461ab497d936493877487936b7b9fa27f806aa3adaf4b3b6f9b"},
    {5, 7, 8, 3, Filter::bicubic,
     "366d9c8f4b826d9c695e62917261996fa56d985281577ab17aa475a94978905b91a7627bab4c809e6984"
     "9c577ea25d967fa28c5a847f929693988771598f8587be8cae6a5c629189"},
    {5, 7, 1, 1, Filter::bicubic, "857484"},
    {9, 5, 4, 12, Filter::bicubic,
     "53568d5c5489724b7e8747778558867b709f837caba07faea575a57154883b346c2627619b7f729e7976"
     "a76b80ad5d8ba6609398699a886b9d74659e72699098865fc2a331d2ae1e75ad3e6fa6525c9483507fb3"
     "6570b488659fa16f8ab38e71b9ab69a9bd8a95c7af8eccbc5887915d8d8b689d7b75a66d848c73906582"
     "82598f57659a3a73a5437db15384ba5987be"},
    {9, 5, 2, 4, Filter::bicubic, "80687b8f5e9290759c87765c6b9a727d7a948477887ea9a2"},
    {9, 5, 9, 2, Filter::bicubic,
     "456c9b864b7a9257865279a8aa4b7aac4d7c9e639a80a77e88b08eae73514f4169b8aa6e9dcca283b2e9"
     "265584507faeb1a367584a72"},
    {9, 5, 1, 5, Filter::bicubic, "7384737f738c8f6998867d8c80917d"},
    {1, 6, 4, 3, Filter::bicubic,
     "2a62919e61904f5f8e2a62919e61904f5f8e2a62919e61904f5f8e2a62919e61904f5f8e"},
    {5, 7, 9, 11, Filter::bilinear,
     "002f5e204f7e4d7cab7baad9a87aa9d504335f31602f5e8d5d8cbb8ab95caad9082655844a5281765786"
     "738bba8f80afc247765344732958875d8cbb90bf62b4e3126493c2905887b91948675786658ab9a3b6e5"
     "3e63921e4d7c5c8bba9ac96cc6f524a3608fa25382a043728d4372856b9a84b3e2725887664372668bba"
     "a49576d79435e21140a84c7b6f86b5c13665b642716594c3b74372c33867738ab9ad5180e8174693507f"
     "a15180b25584b46a998c73a24675a4a2895db8955c7297b96a5b8a6b2857608fa19c6383dc3c6ba090bf"
     "6d92c143568598bd49aedd5272a1b93665940a39689ecd52a2aa7b9e7fae6c84b3786998b23766b7a834"
     "a3d24771a0b83f6e9d1c4b7ac4f322a5d47779a8d74d7cab7e507ff52453c99b279dcc4171a0b84574a3"
     "265584"},
    {5, 7, 3, 4, Filter::bilinear,
     "5757868676a55257868cbb64a4507f9563928b7081906e7c9d9d808171a0a4a953437295"},
    {5, 7, 8, 3, Filter::bilinear,
     "3d6c9b8a4f7e6d9c7061608f786594709f73925180657ead779d76a34c7b8d65949d687aaa5281946c88"
     "95607ea563927b948b60868295948f9481745e8d8589b88baa6f62619088"},
    {5, 7, 1, 1, Filter::bilinear, "867384"},
    {9, 5, 4, 12, Filter::bilinear,
     "5e5988635786755180874c7b845c8b7e6e9d8477a69777a6a274a3755988473d6c393564947e75977a78"
     "a06c81a95d8aa06594956e9d89719f7e6d99776d8f958667b39f3fbca73371a0526d9c5d618c82557ea7"
     "6e71a08b65949e6e87a78b78aea66da1b18b95bda891c0b15e8d886190856a997d74a3747e897c876a85"
     "7d608f5e69984473a24e7dac5786b55a89b8"},
    {9, 5, 2, 4, Filter::bilinear, "81697d8e61908f73988776656e96747d7c94847a8d7ea29f"},
    {9, 5, 9, 2, Filter::bilinear,
     "476a99844a798f5584577baaa94c7bab4e7da066957ea27f8bae8caf755353486bb1a66c9bcaa885b4e3"
     "2958874d7cababa0665b5073"},
    {9, 5, 1, 5, Filter::bilinear, "7486727f738d8e6998887c8a82937b"},
    {1, 6, 4, 3, Filter::bilinear,
     "336291926190555f8e336291926190555f8e336291926190555f8e336291926190555f8e"},
};

TEST(Resample, MatchesPillowByteForByte) {
  for (const PillowCase& c : kPillowCases) {
    const Image got = resize_image(pattern(c.height, c.width), c.out_height, c.out_width, c.filter);
    EXPECT_EQ(got.height, c.out_height);
    EXPECT_EQ(got.width, c.out_width);
    EXPECT_EQ(compare(got, from_hex(c.hex)), "")
        << (c.filter == Filter::bicubic ? "bicubic " : "bilinear ") << c.height << "x" << c.width
        << " -> " << c.out_height << "x" << c.out_width;
  }
}

// Weights are normalized over the part of the filter inside the image, so a constant image
// stays constant up to its edges, whatever the sizes (fixed-point rounding included).
TEST(Resample, ConstantImageStaysConstant) {
  const int64_t in_sizes[] = {1, 2, 3, 7, 16};
  const int64_t out_sizes[] = {1, 2, 3, 5, 11, 32};
  for (const Filter filter : {Filter::bilinear, Filter::bicubic})
    for (const int value : {0, 1, 128, 254, 255})
      for (const int64_t h : in_sizes)
        for (const int64_t w : in_sizes)
          for (const int64_t oh : out_sizes)
            for (const int64_t ow : out_sizes) {
              const Image img{h, w, std::vector<uint8_t>(static_cast<size_t>(h * w * 3), value)};
              const Image out = resize_image(img, oh, ow, filter);
              const std::vector<uint8_t> want(static_cast<size_t>(oh * ow * 3),
                                              static_cast<uint8_t>(value));
              ASSERT_EQ(compare(out, want), "")
                  << value << " " << h << "x" << w << " -> " << oh << "x" << ow;
            }
}

// Each output's fixed-point weights sum to one (1 << 22) within rounding, and its window
// lies inside the input.
TEST(Resample, TapsStayInsideAndSumToOne) {
  for (const Filter filter : {Filter::bilinear, Filter::bicubic})
    for (const int64_t in : {1, 2, 5, 9, 300})
      for (const int64_t out : {1, 3, 4, 10, 301}) {
        const ResampleTaps t = resample_taps(in, out, filter);
        for (int64_t i = 0; i < out; ++i) {
          const auto n = static_cast<size_t>(i);
          EXPECT_GE(t.first[n], 0);
          EXPECT_GE(t.count[n], 1);
          EXPECT_LE(t.first[n] + t.count[n], in);
          EXPECT_LE(t.count[n], t.stride);
          int64_t sum = 0;
          for (int64_t k = 0; k < t.count[n]; ++k)
            sum += t.weight[static_cast<size_t>(i * t.stride + k)];
          EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(1 << kResampleFracBits),
                      static_cast<double>(t.count[n]))
              << in << " -> " << out << " output " << i;
        }
      }
}

TEST(Resample, SameSizeIsACopyAndBadSizesAreErrors) {
  const Image img = pattern(5, 7);
  EXPECT_EQ(resize_image(img, 5, 7, Filter::bicubic).rgb, img.rgb);
  EXPECT_TRUE(test::throws_with([&] { resize_image(img, 0, 7, Filter::bicubic); },
                                "resize_image: target size 0x7 must be positive"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        resize_image(Image{2, 2, {}}, 3, 3, Filter::bilinear);
      },
      "resize_image: the buffer holds 0 bytes, not 2x2x3"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        resize_image(Image{0, 0, {}}, 3, 3, Filter::bilinear);
      },
      "resize_image: the source image is empty (0x0)"));
}

// A window of a result (a center crop, as fit_image takes it) has the bits of the whole
// result cut, in every path: nothing, one side or both changing, width or height first.
TEST(Resample, AWindowIsTheWholeResultCut) {
  struct Case {
    int64_t in_h, in_w, h, w;
  };
  const Case cases[] = {{9, 13, 9, 13}, {9, 13, 9, 31},  {9, 13, 4, 13},   {9, 13, 17, 29},
                        {40, 11, 7, 9}, {11, 40, 7, 19}, {3, 200, 12, 800}};
  for (const Filter f : {Filter::bilinear, Filter::bicubic}) {
    for (const Case& c : cases) {
      const Image img = pattern(c.in_h, c.in_w);
      const Image whole = resample(img, c.h, c.w, f);
      for (const Window win : {Window{0, 0, c.h, c.w}, Window{c.h / 3, c.w / 4, c.h / 2 + 1, 3},
                               Window{c.h - 1, c.w - 2, 1, 2}}) {
        const Image part = resample_window(img, c.h, c.w, win, f);
        ASSERT_EQ(part.height, win.height);
        ASSERT_EQ(part.width, win.width);
        std::vector<uint8_t> cut;
        for (int64_t y = win.top; y < win.top + win.height; ++y)
          cut.insert(cut.end(), whole.rgb.begin() + (y * c.w + win.left) * 3,
                     whole.rgb.begin() + (y * c.w + win.left + win.width) * 3);
        EXPECT_EQ(part.rgb, cut) << c.in_h << "x" << c.in_w << " -> " << c.h << "x" << c.w
                                 << " window at " << win.top << "," << win.left;
      }
    }
  }
  EXPECT_THROW(resample_window(pattern(4, 4), 8, 8, {6, 0, 3, 2}, Filter::bilinear), Error);
}

}  // namespace
}  // namespace zt::data
