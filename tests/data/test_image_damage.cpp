// Damaged images that stb's decoders would read or write out of bounds for, or decode from
// memory nothing was written to: zt's own checks refuse them, naming the file and what is
// wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "data/data_test_util.h"
#include "data/image.h"

namespace zt::data {
namespace {

using datatest::expect_error;
using datatest::temp_dir;

// A JPEG whose one Huffman table claims 16 x 255 codes: stb's table builder wrote past its
// 257-entry size table for it, in the header query already (UBSan: index out of bounds).
// (Sound JPEGs pass the check: ImageFolder.ATruncatedBmpOrTgaIsRefusedAndCompleteFilesAreNot
// loads stb-written ones of four sizes.)
TEST(ImageDamage, AJpegHuffmanTableOfMoreThan256CodesIsRefused) {
  const std::string d = temp_dir();
  std::string bytes = "\xff\xd8\xff\xc4";
  bytes += std::string("\x00\x13\x00", 3) + std::string(16, '\xff') + "\xff\xd9";
  std::ofstream(d + "/huff.jpg", std::ios::binary) << bytes;
  const std::string named =
      "its DHT segment at byte 2 defines a Huffman table of 4080 codes, more than the 256 a "
      "table holds";
  expect_error([&] { load_image(d + "/huff.jpg"); }, {d + "/huff.jpg", "corrupt file", named});
  expect_error([&] { image_size(d + "/huff.jpg"); }, {d + "/huff.jpg", named});
}

// An 8 x 8 JPEG of `components` components (ids 1, 2, 3, or 1 each), one block each, whose one scan
// holds component 1 alone: every block's DC difference 0 and then its end (one code each,
// in Huffman tables of a single 1-bit code), so component 1 decodes to level 128.
// `marker`: its frame's SOF (0xc0 baseline, 0xc2 progressive).
std::string one_scan_jpeg(const std::string& path, int components, uint8_t marker,
                          bool same_ids = false) {
  std::vector<uint8_t> b = {0xff, 0xd8, 0xff, 0xdb, 0x00, 0x43, 0x00};
  b.insert(b.end(), 64, 1);                   // a quantization table of ones
  for (const uint8_t table : {0x00, 0x10}) {  // DC 0, AC 0: one 1-bit code for symbol 0
    b.insert(b.end(), {0xff, 0xc4, 0x00, 0x14, table, 1});
    b.insert(b.end(), 16, 0);
  }
  b.insert(b.end(), {0xff, marker, 0x00, static_cast<uint8_t>(8 + 3 * components), 8, 0, 8, 0, 8,
                     static_cast<uint8_t>(components)});
  for (int c = 1; c <= components; ++c)
    b.insert(b.end(), {static_cast<uint8_t>(same_ids ? 1 : c), 0x11, 0});
  // The scan: component 1, coefficients 0 to 63 (0 to 0 in a progressive frame, its first
  // DC scan); then the bits 0 (DC 0) and 0 (end of block), padded with ones.
  const uint8_t last = marker == 0xc2 ? 0 : 63;
  b.insert(b.end(), {0xff, 0xda, 0x00, 0x08, 1, 1, 0x00, 0, last, 0, 0x3f, 0xff, 0xd9});
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return path;
}

// A JPEG frame component that no scan fills: stb decodes it from memory nothing was
// written to (pixels that change from one decode to the next), so the file is refused,
// naming the component. The same file of one component decodes.
TEST(ImageDamage, AJpegComponentThatNoScanFillsIsRefused) {
  const std::string d = temp_dir();
  const Image grey = load_image(one_scan_jpeg(d + "/grey.jpg", 1, 0xc0));
  EXPECT_EQ(grey.rgb, std::vector<uint8_t>(8 * 8 * 3, 128));
  const std::string three = one_scan_jpeg(d + "/three.jpg", 3, 0xc0);
  expect_error([&] { load_image(three); },
               {three, "corrupt file", "its component 2 of 3 (id 2) is in none of its scans"});
  // Progressive: a component's first DC scan clears its blocks; one without it is refused.
  EXPECT_EQ(load_image(one_scan_jpeg(d + "/grey_p.jpg", 1, 0xc2)).rgb, grey.rgb);
  const std::string three_p = one_scan_jpeg(d + "/three_p.jpg", 3, 0xc2);
  expect_error([&] { load_image(three_p); },
               {"its component 2 of 3 (id 2) is in none of its first DC scans"});
  // Components of one id: a scan fills the first of them (stb looks the id up), never the
  // others.
  const std::string same = one_scan_jpeg(d + "/same.jpg", 3, 0xc0, /*same_ids=*/true);
  expect_error([&] { load_image(same); }, {"its component 2 of 3 (id 1) is in none of its scans"});
}

}  // namespace
}  // namespace zt::data
