// Damaged images that stb's decoders would read or write out of bounds for: zt's own
// checks refuse them before stb sees them, naming the file and what is wrong.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

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

}  // namespace
}  // namespace zt::data
