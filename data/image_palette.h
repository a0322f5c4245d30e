// Palette images whose pixels index past the palette they store. stb's BMP and PNG decoders
// look such a pixel's colour up in a palette array that nothing was written to past the
// stored entries (stack memory: a colour that can change from one decode to the next); the
// image loader (data/image.cpp) refuses these files as corrupt instead.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace zt::data {

/// Why the BMP file `f` is damaged so: its first pixel whose index is past the palette
/// stb reads. "" for a sound file, another format, and the kinds stb refuses itself.
std::string bmp_palette_damage(std::FILE* f);

/// A palette PNG whose PLTE holds fewer colours than its indices can name, with that PLTE
/// padded to 256 entries of `sentinel`, a colour none of its own entries has: decoded, a
/// pixel of that colour is one whose index is past the stored palette.
struct PaddedPng {
  std::vector<unsigned char> bytes;  ///< the file, its PLTE padded (stb reads no CRC)
  uint8_t sentinel[3] = {};
  int64_t colours = 0;  ///< the entries the file's PLTE holds
};

/// The file `f` padded so when it is such a PNG; false (`out` untouched) otherwise.
bool pad_png_palette(std::FILE* f, PaddedPng& out);

/// Why the decoded `rgb` (h x w x 3) of `png` is damaged: its first pixel of the sentinel
/// colour, named with the palette's size; "" when there is none.
std::string png_palette_damage(const PaddedPng& png, const unsigned char* rgb, int64_t h,
                               int64_t w);

}  // namespace zt::data
