// How much of an image's file is read: a JPEG once to load it (its Huffman-table check,
// jpeg_damage, reads the file whole, and stb decodes those bytes instead of reading the file
// again), and only its head, up to its first scan, for its size (ImageFolder's start-up
// check of every file). Counted with Linux's /proc/self/io (rchar: the bytes this process's
// read calls returned). And what is not read as an image, and why: a FIFO, a folder, a PNG
// header of more pixels than an int64 counts, a variant of a known format stb does not read.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "data/data_test_util.h"
#include "data/image.h"
#include "stb_image.h"
#include "stb_image_write.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;

// The bytes read so far by this process (/proc/self/io's rchar); -1 where it is not known.
int64_t bytes_read() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return -1;
}

// A w x h JPEG of noise at quality 95, which compresses little: a file of hundreds of KiB,
// far past stdio's buffer, so a second reading (or a whole one) would show.
std::string noise_jpeg(int w, int h, std::vector<uint8_t>& rgb) {
  rgb.resize(static_cast<size_t>(w * h * 3));
  uint32_t x = 12345;
  for (uint8_t& v : rgb) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<uint8_t>(x >> 24);
  }
  const std::string jpg = datatest::temp_dir() + "/noise.jpg";
  EXPECT_TRUE(stbi_write_jpg(jpg.c_str(), w, h, 3, rgb.data(), 95));
  EXPECT_GT(fs::file_size(jpg), 200'000u);
  return jpg;
}

TEST(ImageRead, AJpegIsReadFromItsFileOnce) {
  const int w = 512, h = 384;
  std::vector<uint8_t> rgb;
  const std::string jpg = noise_jpeg(w, h, rgb);
  const int64_t size = static_cast<int64_t>(fs::file_size(jpg));

  const int64_t before = bytes_read();
  const Image img = load_image(jpg);
  const int64_t after = bytes_read();

  // The pixels are stb's decoding of the file.
  int sw = 0, sh = 0, n = 0;
  unsigned char* ref = stbi_load(jpg.c_str(), &sw, &sh, &n, 3);
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(img.height, h);
  EXPECT_EQ(img.width, w);
  EXPECT_EQ(img.rgb, std::vector<uint8_t>(ref, ref + static_cast<size_t>(w) * h * 3));
  stbi_image_free(ref);

  // The reads: once the file, and not again (Linux counts them in /proc/self/io).
  if (before < 0 || after < 0)
    GTEST_SKIP() << "the pixels match; the bytes read are not counted here (no readable "
                    "/proc/self/io, as outside Linux)";
  const int64_t read = after - before;
  EXPECT_GE(read, size);
  EXPECT_LT(read, size + size / 4)
      << "a " << size << "-byte JPEG took " << read << " bytes of reads to load";
}

TEST(ImageRead, AJpegsSizeIsReadFromItsHeadAlone) {
  std::vector<uint8_t> rgb;
  const std::string jpg = noise_jpeg(512, 384, rgb);
  const int64_t size = static_cast<int64_t>(fs::file_size(jpg));

  const int64_t before = bytes_read();
  const auto [h, w] = image_size(jpg);
  const int64_t after = bytes_read();
  EXPECT_EQ(h, 384);
  EXPECT_EQ(w, 512);

  if (before < 0 || after < 0)
    GTEST_SKIP() << "the size matches; the bytes read are not counted here (no readable "
                    "/proc/self/io, as outside Linux)";
  // The tables and frame header take a few hundred bytes; stdio reads a buffer's worth.
  EXPECT_LT(after - before, 64 * 1024)
      << "the size of a " << size << "-byte JPEG took " << after - before << " bytes of reads";
}

// An image path that is a FIFO (a named pipe nothing writes to) is refused by name: opened,
// it would block the command forever. A folder is named as one too.
TEST(ImageRead, AFifoOrAFolderIsNoImageFile) {
  const std::string d = datatest::temp_dir(), pipe = d + "/pipe.png";
  ASSERT_EQ(mkfifo(pipe.c_str(), 0600), 0);
  datatest::expect_error([&] { load_image(pipe); }, {"'" + pipe + "'", "it is a FIFO"});
  datatest::expect_error([&] { image_size(pipe); }, {"it is a FIFO"});
  fs::create_directory(d + "/dir.png");
  datatest::expect_error([&] { load_image(d + "/dir.png"); }, {"it is a folder"});
}

// A PNG whose header claims sides past 2^31 (which no valid PNG has) is refused as too many
// pixels, as a smaller huge one is: 3221225472 x 3221225472 is past what an int64 counts.
TEST(ImageRead, APngSizePastAnInt64OfPixelsIsRefusedAsTooLarge) {
  const std::string d = datatest::temp_dir(), png = d + "/huge.png";
  for (const uint32_t side : {0x80000000u, 0xc0000000u, 0xffffffffu}) {
    std::vector<uint8_t> bytes = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, ihdr;
    datatest::put_be32(ihdr, side);            // width
    datatest::put_be32(ihdr, side);            // height
    ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB
    datatest::put_chunk(bytes, "IHDR", ihdr.data(), ihdr.size());
    std::ofstream(png, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    const std::string size = std::to_string(side) + "x" + std::to_string(side);
    datatest::expect_error([&] { image_size(png); },
                           {"'" + png + "'", size, "more than zt decodes"});
    datatest::expect_error([&] { load_image(png); }, {size, "more than zt decodes"});
  }
}

// A file of a format zt reads, in a variant stb's decoder does not (an RLE-compressed BMP,
// a 12-bit JPEG), is named by what its decoder says of it: stb's header query tries every
// format and says only that none read it ("Image not of any known type, or corrupt").
TEST(ImageRead, AnUnsupportedVariantOfAKnownFormatSaysWhich) {
  const std::string d = datatest::temp_dir();
  // A 2 x 1 BMP of 8 bits a pixel, RLE8-compressed (compression 1), a palette of 2 colours.
  std::string bmp = "BM";
  auto le = [&](uint32_t v, int n) {
    for (int i = 0; i < n; ++i) bmp += static_cast<char>(v >> (8 * i));
  };
  le(14 + 40 + 8 + 4, 4), le(0, 4), le(14 + 40 + 8, 4);  // file size, reserved, pixels' offset
  le(40, 4), le(2, 4), le(1, 4), le(1, 2), le(8, 2), le(1, 4);  // BITMAPINFOHEADER, RLE8
  le(4, 4), le(0, 4), le(0, 4), le(2, 4), le(0, 4);
  le(0, 4), le(0xffffff, 4);                  // the palette: black, white
  bmp += std::string("\x02\x01\x00\x01", 4);  // two pixels of colour 1, end of bitmap
  std::ofstream(d + "/rle.bmp", std::ios::binary) << bmp;
  for (const auto& fn : std::vector<std::function<void()>>{[&] { image_size(d + "/rle.bmp"); },
                                                           [&] { load_image(d + "/rle.bmp"); }})
    datatest::expect_error(fn, {"rle.bmp", "BMP type not supported: RLE"});
  // A JPEG frame (SOF1) of 12-bit samples, and a scan of its one component.
  const std::string jpeg(
      "\xff\xd8\xff\xc1\x00\x0b\x0c\x00\x08\x00\x08\x01\x01\x11\x00"
      "\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00\x3f\xff\xd9",
      27);
  std::ofstream(d + "/twelve.jpg", std::ios::binary) << jpeg;
  datatest::expect_error([&] { image_size(d + "/twelve.jpg"); }, {"twelve.jpg", "8-bit only"});
  datatest::expect_error([&] { load_image(d + "/twelve.jpg"); }, {"twelve.jpg", "8-bit only"});
}

}  // namespace
}  // namespace zt::data
