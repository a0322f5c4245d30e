// The readers of untrusted files, fed damaged copies of valid ones: each file cut short at
// many lengths and with single bytes changed at many offsets. Deterministic (every cut and
// every change is listed, none drawn at random). What each reader must do with them:
//  1. never crash, overrun a buffer or hang (run under the sanitizers to see the first two);
//  2. refuse a damaged file with zt::Error naming it, or read it as what the format makes of
//     it: a file cut short is refused, or gives exactly the pixels of the whole file (a PNG
//     without its IEND chunk still holds every pixel);
//  3. give what it reads a consistent shape (h x w x 3 bytes; the size image_size reads).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/data_test_util.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/npy.h"
#include "stb_image_write.h"

namespace zt::data {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const Bytes& b, size_t n) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(n));
}

// A 24 x 20 image with edges and noise, so every format spends bytes on each row.
Image test_image() {
  Image img{20, 24, {}};
  uint32_t x = 7;
  for (int64_t y = 0; y < img.height; ++y)
    for (int64_t c = 0; c < img.width; ++c) {
      x = x * 1664525u + 1013904223u;
      img.rgb.insert(img.rgb.end(), {static_cast<uint8_t>(y * 12), static_cast<uint8_t>(c * 10),
                                     static_cast<uint8_t>(x >> 24)});
    }
  return img;
}

void put_le(Bytes& out, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A 24 x 20 palette PNG of 8-bit indices into 5 colours, its rows in stored (uncompressed)
// zlib blocks, one block a row.
Bytes palette_png() {
  Bytes b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, ihdr, plte, z = {0x78, 0x01};
  datatest::put_be32(ihdr, 24);
  datatest::put_be32(ihdr, 20);
  ihdr.insert(ihdr.end(), {8, 3, 0, 0, 0});
  datatest::put_chunk(b, "IHDR", ihdr.data(), ihdr.size());
  for (uint8_t k = 0; k < 5; ++k) plte.insert(plte.end(), {uint8_t(50 * k), uint8_t(9 * k), 7});
  datatest::put_chunk(b, "PLTE", plte.data(), plte.size());
  uint32_t a = 1, s = 0;  // Adler-32
  for (int y = 0; y < 20; ++y) {
    Bytes row = {0};  // filter type 0
    for (int x = 0; x < 24; ++x) row.push_back(static_cast<uint8_t>((x * y + x) % 5));
    for (uint8_t v : row) a = (a + v) % 65521, s = (s + a) % 65521;
    z.push_back(y == 19 ? 1 : 0);
    put_le(z, static_cast<uint32_t>(row.size()), 2);
    put_le(z, static_cast<uint16_t>(~row.size()), 2);
    z.insert(z.end(), row.begin(), row.end());
  }
  datatest::put_be32(z, (s << 16) | a);
  datatest::put_chunk(b, "IDAT", z.data(), z.size());
  datatest::put_chunk(b, "IEND", nullptr, 0);
  return b;
}

// A 24 x 20 bottom-up BMP of 8-bit indices into 5 colours.
Bytes palette_bmp() {
  const uint32_t offset = 14 + 40 + 4 * 5, stride = 24;
  Bytes b = {'B', 'M'};
  put_le(b, offset + stride * 20, 4);
  put_le(b, 0, 4);
  put_le(b, offset, 4);
  for (const uint32_t v : {40u, 24u, 20u}) put_le(b, v, 4);  // header size, width, height
  put_le(b, 1, 2);                                           // planes
  put_le(b, 8, 2);                                           // bits a pixel
  for (const uint32_t v : {0u, stride * 20, 0u, 0u, 5u, 0u}) put_le(b, v, 4);
  for (uint8_t k = 0; k < 5; ++k) b.insert(b.end(), {7, uint8_t(9 * k), uint8_t(50 * k), 0});
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 24; ++x) b.push_back(static_cast<uint8_t>((x + 3 * y) % 5));
  return b;
}

// The test image in each format zt reads (PNG of 1, 3 and 4 channels and of a palette, a
// JPEG, BMPs of 24 and 32 bits and of a palette, TGAs run-length coded and not), as files
// in `dir`.
std::vector<std::string> image_files(const std::string& dir) {
  const Image img = test_image();
  const int w = static_cast<int>(img.width), h = static_cast<int>(img.height);
  Bytes grey, rgba;
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    grey.push_back(img.rgb[i]);
    rgba.insert(rgba.end(), {img.rgb[i], img.rgb[i + 1], img.rgb[i + 2], uint8_t(i)});
  }
  std::vector<std::string> files;
  auto add = [&](const std::string& name, bool written) {
    EXPECT_TRUE(written) << name;
    files.push_back(dir + "/" + name);
    return files.back().c_str();
  };
  save_png(dir + "/a.png", img);
  add("a.png", true);
  add("grey.png", stbi_write_png((dir + "/grey.png").c_str(), w, h, 1, grey.data(), w));
  add("rgba.png", stbi_write_png((dir + "/rgba.png").c_str(), w, h, 4, rgba.data(), 4 * w));
  const Bytes png8 = palette_png(), bmp8 = palette_bmp();
  write_bytes(dir + "/palette.png", png8, png8.size());
  add("palette.png", true);
  add("a.jpg", stbi_write_jpg((dir + "/a.jpg").c_str(), w, h, 3, img.rgb.data(), 90));
  add("a.bmp", stbi_write_bmp((dir + "/a.bmp").c_str(), w, h, 3, img.rgb.data()));
  add("rgba.bmp", stbi_write_bmp((dir + "/rgba.bmp").c_str(), w, h, 4, rgba.data()));
  write_bytes(dir + "/palette.bmp", bmp8, bmp8.size());
  add("palette.bmp", true);
  add("a.tga", stbi_write_tga((dir + "/a.tga").c_str(), w, h, 3, img.rgb.data()));
  stbi_write_tga_with_rle = 0;
  add("plain.tga", stbi_write_tga((dir + "/plain.tga").c_str(), w, h, 3, img.rgb.data()));
  stbi_write_tga_with_rle = 1;
  return files;
}

// `png` with each whole chunk's CRC-32 made to match its type and data again: damage that
// the CRCs do not show, which reaches the decoder.
Bytes recrc(Bytes png) {
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t n = (uint32_t{png[at]} << 24) | (uint32_t{png[at + 1]} << 16) |
                       (uint32_t{png[at + 2]} << 8) | png[at + 3];
    if (n > png.size() - at - 12) break;
    Bytes crc;
    datatest::put_be32(crc, datatest::crc32_of(png.data() + at + 4, n + 4));
    std::copy(crc.begin(), crc.end(), png.begin() + static_cast<std::ptrdiff_t>(at + 8 + n));
    at += 12 + n;
  }
  return png;
}

// What the readers make of `path`, checked against rules 2 and 3 above; `whole` is the
// image of the undamaged file, which a cut file must match where it reads at all.
void check_image_reads(const std::string& path, const std::string& what, const Image* whole) {
  SCOPED_TRACE(what);
  Image img;
  std::string why;
  bool loaded = false;
  try {
    loaded = try_load_image(path, img, why);
    EXPECT_TRUE(loaded || !why.empty());
  } catch (const Error& e) {  // too large to decode: an error naming the file
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  if (loaded) {
    EXPECT_GT(img.height, 0);
    EXPECT_GT(img.width, 0);
    EXPECT_EQ(img.rgb.size(), static_cast<size_t>(img.height * img.width * 3));
    if (whole != nullptr) {
      EXPECT_EQ(img.height, whole->height);
      EXPECT_EQ(img.width, whole->width);
      EXPECT_TRUE(img.rgb == whole->rgb) << "a cut file read as other pixels than the whole";
    }
  }
  try {
    const auto [h, w] = image_size(path);
    EXPECT_GT(h, 0);
    EXPECT_GT(w, 0);
    if (loaded) {
      EXPECT_EQ(h, img.height);
      EXPECT_EQ(w, img.width);
    }
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(ReaderFuzz, ACutImageIsRefusedOrReadWhole) {
  const std::string dir = datatest::temp_dir();
  for (const std::string& file : image_files(dir)) {
    const Image whole = load_image(file);
    const Bytes b = read_bytes(file);
    const std::string cut = file + ".cut" + extension_of(file);
    for (size_t n = 0; n < b.size(); n += n < 64 ? 1 : 7) {
      write_bytes(cut, b, n);
      check_image_reads(cut, file + " cut to " + std::to_string(n) + " bytes", &whole);
    }
  }
}

TEST(ReaderFuzz, AnImageWithAChangedByteIsRefusedOrReadAsSomeImage) {
  const std::string dir = datatest::temp_dir();
  for (const std::string& file : image_files(dir)) {
    const Bytes b = read_bytes(file);
    const std::string bad = file + ".bad" + extension_of(file);
    for (size_t i = 0; i < b.size(); i += i < 64 ? 1 : 23)
      for (const uint8_t change : {uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x01}}) {
        Bytes d = b;
        d[i] ^= change;
        const std::string what =
            file + " byte " + std::to_string(i) + " ^ " + std::to_string(change);
        write_bytes(bad, d, d.size());
        check_image_reads(bad, what, nullptr);
        if (extension_of(file) != ".png") continue;
        d = recrc(d);  // past the CRC check, into the decoder
        write_bytes(bad, d, d.size());
        check_image_reads(bad, what + ", its CRCs made to match", nullptr);
      }
  }
}

// An (N, T, 3, H, W) u1 or f4 array of clips, as numpy.save writes it.
Bytes npy_clips(DType dtype) {
  const Shape shape = {2, 2, 3, 4, 5};
  const std::string header = npy_header(dtype == DType::f32 ? DType::f32 : DType::i32, shape);
  Bytes b(header.begin(), header.end());
  if (dtype == DType::f32) {  // the u1 header is written by hand below
    for (int64_t i = 0; i < shape_numel(shape); ++i) {
      const float v = static_cast<float>(i % 17) / 8.5f - 1.0f;
      const auto* p = reinterpret_cast<const uint8_t*>(&v);
      b.insert(b.end(), p, p + 4);
    }
    return b;
  }
  std::string h = header.substr(10);
  h.replace(h.find("<i4"), 3, "|u1");
  b.assign(header.begin(), header.begin() + 10);
  b.insert(b.end(), h.begin(), h.end());
  for (int64_t i = 0; i < shape_numel(shape); ++i) b.push_back(static_cast<uint8_t>(i * 37));
  return b;
}

// What the .npy readers make of `path`: an error naming it, or an array of the declared
// shape whose every clip reads.
void check_npy_reads(const std::string& path, const std::string& what) {
  SCOPED_TRACE(what);
  try {
    const Tensor t = load_npy(path);
    EXPECT_EQ(t.numel(), read_npy_header(path).numel());
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  try {
    const NpyArray clips(path, 2);
    for (int64_t i = 0; i < clips.size(); ++i) EXPECT_EQ(clips.get(i).clip.numel(), 2 * 3 * 4 * 5);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(ReaderFuzz, ACutNpyIsRefused) {
  const std::string dir = datatest::temp_dir(), path = dir + "/clips.npy";
  for (const DType dtype : {DType::f32, DType::i32}) {
    const Bytes b = npy_clips(dtype);
    write_bytes(path, b, b.size());
    EXPECT_EQ(NpyArray(path, 2).size(), 2);
    for (size_t n = 0; n < b.size(); n += n < 160 ? 1 : 5) {
      write_bytes(path, b, n);
      datatest::expect_error([&] { read_npy_header(path); }, {"'" + path + "'"});
    }
  }
}

TEST(ReaderFuzz, AnNpyWithAChangedByteIsRefusedOrReadAsItsHeaderSays) {
  const std::string dir = datatest::temp_dir(), path = dir + "/clips.npy";
  for (const DType dtype : {DType::f32, DType::i32}) {
    const Bytes b = npy_clips(dtype);
    for (size_t i = 0; i < b.size(); i += i < 128 ? 1 : 11)
      for (const uint8_t change : {uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x01}, uint8_t{0x10}}) {
        Bytes d = b;
        d[i] ^= change;
        write_bytes(path, d, d.size());
        check_npy_reads(path, "byte " + std::to_string(i) + " ^ " + std::to_string(change));
      }
  }
}

}  // namespace
}  // namespace zt::data
