// The 3x5 caption font and band drawing.
#include "data/caption.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/error.h"

namespace zt::data {

namespace {

// Glyph rows top to bottom, '#' on; 3 columns each.
struct Glyph {
  char c;
  const char* rows[5];
};

constexpr Glyph kFont[] = {
    {'A', {"###", "#.#", "###", "#.#", "#.#"}}, {'B', {"##.", "#.#", "##.", "#.#", "##."}},
    {'C', {"###", "#..", "#..", "#..", "###"}}, {'D', {"##.", "#.#", "#.#", "#.#", "##."}},
    {'E', {"###", "#..", "##.", "#..", "###"}}, {'F', {"###", "#..", "##.", "#..", "#.."}},
    {'G', {"###", "#..", "#.#", "#.#", "###"}}, {'H', {"#.#", "#.#", "###", "#.#", "#.#"}},
    {'I', {"###", ".#.", ".#.", ".#.", "###"}}, {'J', {"..#", "..#", "..#", "#.#", "###"}},
    {'K', {"#.#", "#.#", "##.", "#.#", "#.#"}}, {'L', {"#..", "#..", "#..", "#..", "###"}},
    {'M', {"#.#", "###", "###", "#.#", "#.#"}}, {'N', {"##.", "#.#", "#.#", "#.#", "#.#"}},
    {'O', {"###", "#.#", "#.#", "#.#", "###"}}, {'P', {"###", "#.#", "###", "#..", "#.."}},
    {'Q', {"###", "#.#", "#.#", "###", "..#"}}, {'R', {"##.", "#.#", "##.", "#.#", "#.#"}},
    {'S', {"###", "#..", "###", "..#", "###"}}, {'T', {"###", ".#.", ".#.", ".#.", ".#."}},
    {'U', {"#.#", "#.#", "#.#", "#.#", "###"}}, {'V', {"#.#", "#.#", "#.#", "#.#", ".#."}},
    {'W', {"#.#", "#.#", "###", "###", "#.#"}}, {'X', {"#.#", "#.#", ".#.", "#.#", "#.#"}},
    {'Y', {"#.#", "#.#", ".#.", ".#.", ".#."}}, {'Z', {"###", "..#", ".#.", "#..", "###"}},
    {'0', {"###", "#.#", "#.#", "#.#", "###"}}, {'1', {".#.", "##.", ".#.", ".#.", "###"}},
    {'2', {"###", "..#", "###", "#..", "###"}}, {'3', {"###", "..#", ".##", "..#", "###"}},
    {'4', {"#.#", "#.#", "###", "..#", "..#"}}, {'5', {"###", "#..", "###", "..#", "###"}},
    {'6', {"###", "#..", "###", "#.#", "###"}}, {'7', {"###", "..#", ".#.", ".#.", ".#."}},
    {'8', {"###", "#.#", "###", "#.#", "###"}}, {'9', {"###", "#.#", "###", "..#", "###"}},
    {' ', {"...", "...", "...", "...", "..."}}, {'-', {"...", "...", "###", "...", "..."}},
    {':', {"...", ".#.", "...", ".#.", "..."}}, {'.', {"...", "...", "...", "...", ".#."}},
    {',', {"...", "...", "...", ".#.", "#.."}}, {'(', {".#.", "#..", "#..", "#..", ".#."}},
    {')', {".#.", "..#", "..#", "..#", ".#."}}, {'/', {"..#", "..#", ".#.", "#..", "#.."}},
    {'=', {"...", "###", "...", "###", "..."}}, {'?', {"###", "..#", ".##", "...", ".#."}},
};
constexpr int kGlyphW = 3, kGlyphH = 5, kAdvance = kGlyphW + 1, kLineH = kGlyphH + 2;

const Glyph& glyph(char c) {
  const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const Glyph& g : kFont)
    if (g.c == u) return g;
  return kFont[std::size(kFont) - 1];  // '?'
}

// Greedy word wrap to at most `cols` characters per line (a longer word is cut).
std::vector<std::string> wrap(const std::string& text, int64_t cols) {
  std::vector<std::string> lines;
  std::istringstream words(text);
  std::string word, line;
  while (words >> word) {
    while (static_cast<int64_t>(word.size()) > cols) {
      if (!line.empty()) lines.push_back(line), line.clear();
      lines.push_back(word.substr(0, static_cast<size_t>(cols)));
      word = word.substr(static_cast<size_t>(cols));
    }
    if (line.empty()) {
      line = word;
    } else if (static_cast<int64_t>(line.size() + 1 + word.size()) <= cols) {
      line += " " + word;
    } else {
      lines.push_back(line);
      line = word;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

}  // namespace

Image with_caption(const Image& img, const std::string& text, int scale) {
  ZT_CHECK(img.width > 0 && img.height > 0, "with_caption: empty image");
  ZT_CHECK(scale >= 0, "with_caption: scale must be >= 0, got ", scale);
  if (scale == 0) scale = img.width >= 2 * (12 * kAdvance + 2) ? 2 : 1;
  const int64_t cols = std::max<int64_t>(1, (img.width - 2) / (kAdvance * scale));
  const std::vector<std::string> lines = wrap(text, cols);
  const int64_t band = (static_cast<int64_t>(lines.size()) * kLineH + 1) * scale;
  Image out;
  out.width = img.width;
  out.height = img.height + band;
  out.rgb.assign(static_cast<size_t>(out.width * band * 3), 32);  // the dark band
  out.rgb.insert(out.rgb.end(), img.rgb.begin(), img.rgb.end());
  for (size_t l = 0; l < lines.size(); ++l)
    for (size_t i = 0; i < lines[l].size(); ++i) {
      const Glyph& g = glyph(lines[l][i]);
      const int64_t x0 = 1 + static_cast<int64_t>(i) * kAdvance * scale;
      const int64_t y0 = (static_cast<int64_t>(l) * kLineH + 2) * scale;
      for (int r = 0; r < kGlyphH; ++r)
        for (int c = 0; c < kGlyphW; ++c) {
          if (g.rows[r][c] != '#') continue;
          for (int dy = 0; dy < scale; ++dy)
            for (int dx = 0; dx < scale; ++dx) {
              const int64_t y = y0 + r * scale + dy, x = x0 + c * scale + dx;
              if (x >= out.width) continue;
              uint8_t* p = out.rgb.data() + (y * out.width + x) * 3;
              p[0] = p[1] = p[2] = 255;
            }
        }
    }
  return out;
}

Image stack_images(const std::vector<Image>& images) {
  ZT_CHECK(!images.empty(), "stack_images: no images");
  Image out;
  for (const Image& im : images) {
    out.width = std::max(out.width, im.width);
    out.height += im.height;
  }
  out.rgb.assign(static_cast<size_t>(out.width * out.height * 3), 128);
  int64_t y0 = 0;
  for (const Image& im : images) {
    for (int64_t y = 0; y < im.height; ++y)
      std::copy_n(im.rgb.data() + y * im.width * 3, im.width * 3,
                  out.rgb.data() + ((y0 + y) * out.width) * 3);
    y0 += im.height;
  }
  return out;
}

}  // namespace zt::data
