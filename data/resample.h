// Resampling of 8-bit images as Pillow's Image.resize does it (BILINEAR and BICUBIC), bit
// for bit, so for lossless files (PNG, BMP, TGA) the pixels prepared here equal those of a
// PyTorch pipeline that resizes PIL images (torchvision's Resize), but for two kinds whose
// decoding differs: stb widens a 16-bit BMP's 5- and 6-bit channels by repeating bits (PIL
// scales them; one level apart for about half the values) and keeps a 16-bit greyscale
// PNG's high bytes (PIL clips the samples to 255). JPEG files are decoded
// by stb_image, not by libjpeg as PIL decodes them: its chroma upsampling, YCbCr->RGB
// conversion and IDCT round differently, so decoded JPEG pixels, and everything made from
// them, can differ from PIL's by a level or two. The reference is Pillow 13; older Pillow
// differs only in the order of the two passes when the height shrinks most (see
// resample.cpp).
//
// Each axis whose size changes is filtered in its own pass. Output sample i of an axis
// scaled by s = in / out is centred at (i + 0.5) * s in the input; its filter is stretched
// by max(s, 1) (antialiasing when shrinking), cut to the image's extent and normalized over
// what is left (no edge padding). Weights are 22-bit fixed point, and each pass rounds and
// clips to 8 bits.
#pragma once

#include <cstdint>
#include <vector>

#include "data/image.h"

namespace zt::data {

/// One axis' filter taps: output sample i is the weighted sum of inputs
/// first[i] .. first[i] + count[i] - 1 with weights weight[i * stride + k] (value 1 is
/// 1 << kResampleFracBits).
struct ResampleTaps {
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<int32_t> weight;
  int64_t stride = 0;
};

/// Fraction bits of the fixed-point weights.
constexpr int kResampleFracBits = 22;

/// The taps that take an axis of in_size samples to out_size (both >= 1).
ResampleTaps resample_taps(int64_t in_size, int64_t out_size, Filter filter);
/// Those of output samples start .. start + len - 1 alone (entry 0 is sample `start`).
ResampleTaps resample_taps(int64_t in_size, int64_t out_size, int64_t start, int64_t len,
                           Filter filter);

/// img (H x W x 3) resampled to height x width; an unchanged axis is not filtered. Width
/// first, unless the image loses more than twice as many rows as columns (Pillow 13's order).
Image resample(const Image& img, int64_t height, int64_t width, Filter filter);

/// A part of a result: rows top .. top + height - 1, columns left .. left + width - 1.
struct Window {
  int64_t top = 0, left = 0, height = 0, width = 0;
};
/// resample(img, height, width, filter) cut to `win`, the same bits, computing only the
/// window's pixels: a center crop of an image much wider or taller than its target holds
/// no more than the window (a 1 x 100000 banner cropped to 256 x 256 would otherwise be
/// scaled to 256 x 25600000 first).
Image resample_window(const Image& img, int64_t height, int64_t width, const Window& win,
                      Filter filter);

}  // namespace zt::data
