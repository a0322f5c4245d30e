// Writing PNGs: stb_image_write's encoder, with the sizes it can hold checked first, and
// the file written atomically.
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/text_file.h"
#include "data/image.h"
#include "stb_image_write.h"

namespace zt::data {

std::vector<uint8_t> encode_png(const Image& img) {
  // stb_image_write filters the rows into one buffer of (3 W + 1) x H bytes and deflates
  // them into another, sized and grown in int (capacity 2 m + 1: past 1.6e9 bytes it
  // overflows) with up to 9/8 of the rows (9-bit literal codes): past that its sizes wrap,
  // undefined behaviour and a heap overrun. 2^30 bytes of rows keeps both well inside.
  constexpr int64_t kMaxRowBytes = int64_t{1} << 30;
  ZT_CHECK(img.height < kMaxRowBytes && img.width < kMaxRowBytes &&
               (img.width * 3 + 1) * img.height <= kMaxRowBytes,
           "encode_png: a ", img.height, "x", img.width,
           " image is too large to write as a PNG (at most 2^30 bytes of rows, (3 x width + 1) "
           "x height, about 358 million pixels); write a smaller image (fewer or smaller "
           "samples on one sheet)");
  ZT_CHECK(img.height >= 1 && img.width >= 1 &&
               static_cast<int64_t>(img.rgb.size()) == img.height * img.width * 3,
           "encode_png: the buffer holds ", img.rgb.size(), " bytes, not ", img.height, "x",
           img.width, "x3");
  std::vector<uint8_t> out;
  auto append = [](void* ctx, void* data, int n) {
    auto* v = static_cast<std::vector<uint8_t>*>(ctx);
    const auto* p = static_cast<const uint8_t*>(data);
    v->insert(v->end(), p, p + n);
  };
  const int ok = stbi_write_png_to_func(append, &out, static_cast<int>(img.width),
                                        static_cast<int>(img.height), 3, img.rgb.data(),
                                        static_cast<int>(img.width * 3));
  ZT_CHECK(ok, "encode_png: stb could not encode a ", img.height, "x", img.width, " image");
  return out;
}

void save_png(const std::string& path, const Image& img) {
  const std::vector<uint8_t> png = encode_png(img);
  write_file_atomically(path, [&](std::FILE* f) { return write_all(f, png.data(), png.size()); });
}

}  // namespace zt::data
