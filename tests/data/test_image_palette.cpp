// A BMP or PNG whose pixels index past the palette it stores: stb's decoders read those
// colours from their palette arrays where nothing was written (stack memory: a colour that
// changes from one decode to another), so zt refuses such a file as corrupt, naming the
// pixel. Palettes of every size that the indices stay within decode as stored.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "data/data_test_util.h"
#include "data/image.h"

namespace zt::data {
namespace {

void put_le(std::vector<uint8_t>& out, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A bottom-up BMP of one row of `width` pixels at `bpp` bits (1, 4 or 8), a palette of
// `colours` entries (colour k is (k, 2k, 3k)) and the row's bytes as given (padded to 4).
std::string write_bmp(const std::string& path, int width, int bpp, int colours,
                      std::vector<uint8_t> row) {
  row.resize((row.size() + 3) / 4 * 4, 0);
  const uint32_t offset = 14 + 40 + 4 * static_cast<uint32_t>(colours);
  std::vector<uint8_t> b = {'B', 'M'};
  put_le(b, offset + static_cast<uint32_t>(row.size()), 4);
  put_le(b, 0, 4);
  put_le(b, offset, 4);
  put_le(b, 40, 4);  // BITMAPINFOHEADER
  put_le(b, static_cast<uint32_t>(width), 4);
  put_le(b, 1, 4);  // height
  put_le(b, 1, 2);  // planes
  put_le(b, static_cast<uint32_t>(bpp), 2);
  put_le(b, 0, 4);  // BI_RGB
  put_le(b, static_cast<uint32_t>(row.size()), 4);
  put_le(b, 0, 4);
  put_le(b, 0, 4);
  put_le(b, static_cast<uint32_t>(colours), 4);
  put_le(b, 0, 4);
  for (int k = 0; k < colours; ++k)
    b.insert(b.end(), {uint8_t(3 * k), uint8_t(2 * k), uint8_t(k), 0});
  b.insert(b.end(), row.begin(), row.end());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return path;
}

TEST(ImagePalette, ABmpIndexPastThePaletteIsRefusedAndIndicesWithinItDecode) {
  const std::string d = datatest::temp_dir();
  // 8 bits: colours 0, 1, then 200 of a palette of 2.
  const std::string past8 = write_bmp(d + "/past8.bmp", 3, 8, 2, {0, 1, 200});
  datatest::expect_error(
      [&] { load_image(past8); },
      {"'" + past8 + "'", "row 0, column 2", "colour 200", "past the palette of 2 colours"});
  // 4 bits, an odd width: the last byte's low nibble is padding, not a pixel.
  const std::string pad4 = write_bmp(d + "/pad4.bmp", 3, 4, 3, {0x12, 0x2f});
  const Image img = load_image(pad4);
  EXPECT_EQ(img.rgb, (std::vector<uint8_t>{1, 2, 3, 2, 4, 6, 2, 4, 6}));
  const std::string past4 = write_bmp(d + "/past4.bmp", 3, 4, 3, {0x12, 0x30});
  datatest::expect_error([&] { load_image(past4); },
                         {"column 2", "colour 3", "palette of 3 colours"});
  // 1 bit, a palette of one colour: a set bit is past it; the row's padding bits are not.
  const std::string one = write_bmp(d + "/one.bmp", 3, 1, 1, {0x1f});
  EXPECT_EQ(load_image(one).rgb, std::vector<uint8_t>(9, 0));
  const std::string set = write_bmp(d + "/set.bmp", 3, 1, 1, {0x20});
  datatest::expect_error([&] { load_image(set); },
                         {"column 2", "colour 1", "palette of 1 colour that"});
}

// A palette PNG of one row: `depth`-bit indices (packed from the high bits, as PNG packs
// them) under a PLTE of `colours` entries (colour k is (k, 2k, 3k)), its data in a stored
// (uncompressed) zlib block.
std::string write_png(const std::string& path, int width, int depth, int colours,
                      const std::vector<uint8_t>& row) {
  std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, ihdr, plte, raw = {0};
  datatest::put_be32(ihdr, static_cast<uint32_t>(width));
  datatest::put_be32(ihdr, 1);
  ihdr.insert(ihdr.end(), {static_cast<uint8_t>(depth), 3, 0, 0, 0});  // palette
  datatest::put_chunk(b, "IHDR", ihdr.data(), ihdr.size());
  for (int k = 0; k < colours; ++k)
    for (int c = 1; c <= 3; ++c) plte.push_back(static_cast<uint8_t>(c * k));
  datatest::put_chunk(b, "PLTE", plte.data(), plte.size());
  raw.insert(raw.end(), row.begin(), row.end());  // filter type 0, then the row
  uint32_t a = 1, s = 0;                          // Adler-32
  for (uint8_t v : raw) a = (a + v) % 65521, s = (s + a) % 65521;
  const auto n = static_cast<uint16_t>(raw.size());
  std::vector<uint8_t> z = {0x78, 0x01, 1};  // zlib's header, a last stored block
  put_le(z, n, 2);
  put_le(z, static_cast<uint16_t>(~n), 2);
  for (uint8_t v : raw) z.push_back(v);
  datatest::put_be32(z, (s << 16) | a);
  datatest::put_chunk(b, "IDAT", z.data(), z.size());
  const uint8_t none[1] = {};
  datatest::put_chunk(b, "IEND", none, 0);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return path;
}

TEST(ImagePalette, APngIndexPastItsPlteIsRefusedAndIndicesWithinItDecode) {
  const std::string d = datatest::temp_dir();
  const std::string within = write_png(d + "/within.png", 3, 8, 2, {1, 0, 1});
  EXPECT_EQ(load_image(within).rgb, (std::vector<uint8_t>{1, 2, 3, 0, 0, 0, 1, 2, 3}));
  const std::string past = write_png(d + "/past.png", 3, 8, 2, {0, 1, 200});
  datatest::expect_error([&] { load_image(past); }, {"'" + past + "'", "row 0, column 2",
                                                     "past its palette (PLTE) of 2 colours"});
  // 2 bits a pixel, 3 colours: index 3 (the last pixel's bits 11) is past them.
  const std::string two = write_png(d + "/two.png", 3, 2, 3, {0x24});  // 00 10 01 00
  EXPECT_EQ(load_image(two).rgb, (std::vector<uint8_t>{0, 0, 0, 2, 4, 6, 1, 2, 3}));
  const std::string three = write_png(d + "/three.png", 3, 2, 3, {0x1c});  // 00 01 11 00
  datatest::expect_error([&] { load_image(three); }, {"column 2", "palette (PLTE) of 3 colours"});
}

}  // namespace
}  // namespace zt::data
