// The palette index checks of BMP and PNG files. A BMP's indices are read from its file; a
// PNG's are filtered and compressed, so its palette is padded with a colour it does not
// hold instead, and the decoded pixels are searched for that colour.
#include "data/image_palette.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <sys/stat.h>

#include "core/error.h"
#include "core/plural.h"

namespace zt::data {

namespace {

// A little-endian number of `n` bytes, as BMP writes them.
uint32_t le(const unsigned char* b, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

// A big-endian 32-bit number, as PNG writes them.
uint32_t be(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

}  // namespace

// The palette's size is stb's: the room between the header and the pixels (4 entries short
// for OS/2's headers, as stb counts them).
std::string bmp_palette_damage(std::FILE* f) {
  unsigned char h[34] = {};
  std::rewind(f);
  if (std::fread(h, 1, sizeof h, f) != sizeof h || h[0] != 'B' || h[1] != 'M') return "";
  const auto offset = static_cast<int64_t>(le(h + 10, 4)), hsz = int64_t{le(h + 14, 4)};
  const bool core = hsz == 12;  // OS/2's header: 16-bit sides, 3-byte palette entries
  const int64_t w = core ? le(h + 18, 2) : static_cast<int32_t>(le(h + 18, 4));
  const int64_t height = core ? le(h + 20, 2) : static_cast<int32_t>(le(h + 22, 4));
  const int64_t rows = std::abs(height);  // stored bottom-up, or top-down where negative
  const auto bpp = static_cast<int>(le(h + (core ? 24 : 28), 2));
  const int64_t colours = core ? (offset - 14 - 24) / 3 : (offset - 14 - hsz) >> 2;
  if ((bpp != 1 && bpp != 4 && bpp != 8) || (!core && le(h + 30, 4) != 0) || w <= 0 ||
      colours <= 0 || colours >= (int64_t{1} << bpp) || std::fseek(f, offset, SEEK_SET) != 0)
    return "";
  const int64_t row_bytes = (w * bpp + 7) / 8;
  std::vector<unsigned char> row(static_cast<size_t>((row_bytes + 3) / 4 * 4));
  for (int64_t y = 0; y < rows; ++y) {
    if (std::fread(row.data(), 1, row.size(), f) < static_cast<size_t>(row_bytes)) return "";
    for (int64_t x = 0; x < w; ++x) {
      const int64_t bit = x * bpp;  // from the row's first byte's high bit
      const int index =
          (row[static_cast<size_t>(bit / 8)] >> (8 - bpp - bit % 8)) & ((1 << bpp) - 1);
      if (index >= colours)
        return detail::cat("its pixel at row ", height < 0 ? y : rows - 1 - y, ", column ", x,
                           " is colour ", index, ", past the palette of ",
                           counted(colours, "colour"), " that its decoder reads");
    }
  }
  return "";
}

bool pad_png_palette(std::FILE* f, PaddedPng& out) {
  constexpr unsigned char kSignature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  unsigned char head[33] = {};  // the signature and IHDR
  std::rewind(f);
  if (std::fread(head, 1, sizeof head, f) != sizeof head || std::memcmp(head, kSignature, 8) != 0 ||
      std::memcmp(head + 12, "IHDR", 4) != 0 || head[25] != 3)  // not a palette PNG
    return false;
  const int depth = std::min<int>(head[24], 8);
  struct stat st {};
  if (fstat(fileno(f), &st) != 0 || st.st_size > (int64_t{1} << 31)) return false;
  std::vector<unsigned char> b(static_cast<size_t>(st.st_size));
  std::rewind(f);
  b.resize(std::fread(b.data(), 1, b.size(), f));
  // The chunks up to the first IDAT: a PLTE there is the one stb reads.
  for (size_t at = 8; at + 12 <= b.size();) {
    const uint32_t length = be(&b[at]);
    const std::string type(b.begin() + static_cast<std::ptrdiff_t>(at + 4),
                           b.begin() + static_cast<std::ptrdiff_t>(at + 8));
    if (type == "IDAT" || length > b.size() - at - 12) return false;
    if (type != "PLTE") {
      at += 12 + length;
      continue;
    }
    const int64_t colours = length / 3;
    if (colours * 3 != length || colours == 0 || colours >= (int64_t{1} << depth)) return false;
    // The first colour, counting up from black, that no entry has (255 entries at most
    // cannot hold all of the first 256).
    auto held = [&](uint32_t rgb) {
      for (size_t e = at + 8; e < at + 8 + length; e += 3)
        if ((uint32_t{b[e]} << 16 | uint32_t{b[e + 1]} << 8 | b[e + 2]) == rgb) return true;
      return false;
    };
    uint32_t pick = 0;
    while (held(pick)) ++pick;
    out.colours = colours;
    out.sentinel[0] = static_cast<uint8_t>(pick >> 16);
    out.sentinel[1] = static_cast<uint8_t>(pick >> 8);
    out.sentinel[2] = static_cast<uint8_t>(pick);
    out.bytes.assign(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(at));
    const unsigned char plte[8] = {0, 0, 3, 0, 'P', 'L', 'T', 'E'};  // 768 bytes
    out.bytes.insert(out.bytes.end(), plte, plte + 8);
    out.bytes.insert(out.bytes.end(), b.begin() + static_cast<std::ptrdiff_t>(at + 8),
                     b.begin() + static_cast<std::ptrdiff_t>(at + 8 + length));
    for (int64_t k = colours; k < 256; ++k)
      out.bytes.insert(out.bytes.end(), out.sentinel, out.sentinel + 3);
    out.bytes.insert(out.bytes.end(), 4, 0);  // its CRC, which stb does not read
    out.bytes.insert(out.bytes.end(), b.begin() + static_cast<std::ptrdiff_t>(at + 12 + length),
                     b.end());
    return true;
  }
  return false;
}

std::string png_palette_damage(const PaddedPng& png, const unsigned char* rgb, int64_t h,
                               int64_t w) {
  for (int64_t i = 0; i < h * w; ++i)
    if (std::memcmp(rgb + 3 * i, png.sentinel, 3) == 0)
      return detail::cat("its pixel at row ", i / w, ", column ", i % w,
                         " has a colour index past its palette (PLTE) of ",
                         counted(png.colours, "colour"));
  return "";
}

}  // namespace zt::data
