// Pillow's resampling of 8-bit images (see resample.h). Equality to the bit rests on doing
// the same double arithmetic in the same order when the weights are made: the filter at
// (j - centre + 0.5) / stretch (a multiplication by the reciprocal), the sum of a window's
// weights in order, a division by it, and rounding halves away from zero into fixed
// point. This file is compiled with -ffp-contract=off (data/CMakeLists.txt) so that no
// multiply-add is fused into an FMA, which rounds once where Pillow rounds twice.
#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace zt::data {

namespace {

constexpr int64_t kChannels = 3;

// Half of the filter's width at scale 1, in input samples.
double filter_support(Filter filter) {
  return filter == Filter::bicubic ? 2.0 : 1.0;
}

// The tent: 1 - |x| on (-1, 1).
double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution kernel with a = -0.5 (Catmull-Rom), in Horner form:
// (a + 2)|x|^3 - (a + 3)|x|^2 + 1 on [0, 1), a(|x|^3 - 5|x|^2 + 8|x| - 4) on [1, 2).
double cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// Weights to fixed point, halves away from zero, as a truncation of scaled +- 0.5. That sum
// is itself rounded in double, so it differs from std::round just below a half
// (0.49999999999999994 + 0.5 is 1.0); Pillow's weights are made this way.
int32_t to_fixed(double w) {
  const double scaled = w * static_cast<double>(int64_t{1} << kResampleFracBits);
  return static_cast<int32_t>(w < 0.0 ? scaled - 0.5 : scaled + 0.5);
}

// The accumulator's start: one half, so the final shift rounds halves up.
constexpr int64_t kHalf = int64_t{1} << (kResampleFracBits - 1);

// Fixed point back to 8 bits (the shift floors), clipped: bicubic over- and undershoots.
uint8_t to_u8(int64_t acc) {
  return static_cast<uint8_t>(std::clamp<int64_t>(acc >> kResampleFracBits, 0, 255));
}

// Horizontal pass: `rows` rows of `in` (in_w x 3 bytes each) -> rows of out_w x 3 bytes.
std::vector<uint8_t> resample_rows(const uint8_t* in, int64_t rows, int64_t in_w, int64_t out_w,
                                   const ResampleTaps& t) {
  std::vector<uint8_t> out(static_cast<size_t>(rows * out_w * kChannels));
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* row = in + y * in_w * kChannels;
    uint8_t* dst = out.data() + y * out_w * kChannels;
    for (int64_t x = 0; x < out_w; ++x) {
      const uint8_t* p = row + t.first[static_cast<size_t>(x)] * kChannels;
      const int32_t* w = t.weight.data() + x * t.stride;
      int64_t acc[kChannels] = {kHalf, kHalf, kHalf};
      for (int64_t k = 0; k < t.count[static_cast<size_t>(x)]; ++k)
        for (int64_t c = 0; c < kChannels; ++c) acc[c] += p[k * kChannels + c] * w[k];
      for (int64_t c = 0; c < kChannels; ++c) dst[x * kChannels + c] = to_u8(acc[c]);
    }
  }
  return out;
}

// Vertical pass: out_h rows of row_len bytes, output row y from rows t.first[y] - row0 ...
// of `in` (whose first row is input row row0). An output row is summed a whole input row
// at a time, which reads memory in order.
std::vector<uint8_t> resample_columns(const uint8_t* in, int64_t row0, int64_t row_len,
                                      int64_t out_h, const ResampleTaps& t) {
  std::vector<uint8_t> out(static_cast<size_t>(out_h * row_len));
  std::vector<int64_t> acc(static_cast<size_t>(row_len));
  for (int64_t y = 0; y < out_h; ++y) {
    std::fill(acc.begin(), acc.end(), kHalf);
    const int32_t* w = t.weight.data() + y * t.stride;
    for (int64_t k = 0; k < t.count[static_cast<size_t>(y)]; ++k) {
      const uint8_t* row = in + (t.first[static_cast<size_t>(y)] - row0 + k) * row_len;
      for (int64_t i = 0; i < row_len; ++i) acc[static_cast<size_t>(i)] += row[i] * w[k];
    }
    uint8_t* dst = out.data() + y * row_len;
    for (int64_t i = 0; i < row_len; ++i) dst[i] = to_u8(acc[static_cast<size_t>(i)]);
  }
  return out;
}

// Pillow 13 filters the height first when the image loses more than twice as many rows
// as columns (the cheaper order there); before 13 it always went width first. Each pass
// rounds to 8 bits, so the order shows in the output (bicubic at hard edges: tens of
// levels) and is followed.
bool height_first(int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w) {
  return out_h < in_h && in_h - out_h > 2 * (in_w - out_w);
}

}  // namespace

ResampleTaps resample_taps(int64_t in_size, int64_t out_size, Filter filter) {
  return resample_taps(in_size, out_size, 0, out_size, filter);
}

ResampleTaps resample_taps(int64_t in_size, int64_t out_size, int64_t start, int64_t len,
                           Filter filter) {
  ZT_CHECK(in_size >= 1 && out_size >= 1, "resample_taps: sizes ", in_size, " -> ", out_size,
           " must be positive");
  ZT_CHECK(start >= 0 && len >= 1 && start + len <= out_size, "resample_taps: outputs ", start,
           " .. ", start + len - 1, " are not within 0 .. ", out_size - 1);
  double (*const kernel)(double) = filter == Filter::bicubic ? cubic : triangle;
  // Pillow carries the source extent as a float; the cast keeps its scale for sides
  // beyond 2^24 too.
  const double scale =
      static_cast<double>(static_cast<float>(in_size)) / static_cast<double>(out_size);
  // Shrinking stretches the filter over `stretch` inputs per output (antialiasing).
  const double stretch = std::max(scale, 1.0);
  const double support = filter_support(filter) * stretch;
  const double inv_stretch = 1.0 / stretch;
  ResampleTaps t;
  t.stride = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<size_t>(len));
  t.count.resize(static_cast<size_t>(len));
  t.weight.assign(static_cast<size_t>(len * t.stride), 0);
  std::vector<double> w(static_cast<size_t>(t.stride));
  for (int64_t i = 0; i < len; ++i) {
    const double centre = (static_cast<double>(start + i) + 0.5) * scale;
    // The window [centre - support, centre + support) rounded to whole samples (truncated
    // as a C cast does) and cut to the image.
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(centre - support + 0.5));
    const int64_t hi = std::min<int64_t>(in_size, static_cast<int64_t>(centre + support + 0.5));
    const int64_t n = std::max<int64_t>(0, hi - lo);
    double sum = 0.0;
    for (int64_t k = 0; k < n; ++k) {
      w[static_cast<size_t>(k)] =
          kernel((static_cast<double>(lo + k) - centre + 0.5) * inv_stretch);
      sum += w[static_cast<size_t>(k)];
    }
    // Normalizing over the cut window is what keeps the edges unbiased without padding.
    for (int64_t k = 0; k < n; ++k) {
      const double wk = sum != 0.0 ? w[static_cast<size_t>(k)] / sum : w[static_cast<size_t>(k)];
      t.weight[static_cast<size_t>(i * t.stride + k)] = to_fixed(wk);
    }
    t.first[static_cast<size_t>(i)] = lo;
    t.count[static_cast<size_t>(i)] = n;
  }
  return t;
}

Image resample(const Image& img, int64_t height, int64_t width, Filter filter) {
  return resample_window(img, height, width, {0, 0, height, width}, filter);
}

Image resample_window(const Image& img, int64_t height, int64_t width, const Window& win,
                      Filter filter) {
  ZT_CHECK(img.height >= 1 && img.width >= 1 && height >= 1 && width >= 1 &&
               static_cast<int64_t>(img.rgb.size()) == img.height * img.width * kChannels,
           "resample: cannot take a ", img.height, "x", img.width, " image of ", img.rgb.size(),
           " bytes to ", height, "x", width);
  ZT_CHECK(win.top >= 0 && win.left >= 0 && win.height >= 1 && win.width >= 1 &&
               win.top + win.height <= height && win.left + win.width <= width,
           "resample: the window ", win.height, "x", win.width, " at (", win.top, ", ", win.left,
           ") is not inside the ", height, "x", width, " result");
  const int64_t in_h = img.height, in_w = img.width, out_h = win.height, out_w = win.width;
  Image out;
  out.height = out_h;
  out.width = out_w;
  // A side that keeps its size is not filtered (as Pillow skips that pass), only cut.
  const bool rows_change = width != in_w, cols_change = height != in_h;
  const uint8_t* src = img.rgb.data();
  if (!rows_change && !cols_change) {
    out.rgb.resize(static_cast<size_t>(out_h * out_w * kChannels));
    for (int64_t y = 0; y < out_h; ++y)
      std::memcpy(out.rgb.data() + y * out_w * kChannels,
                  src + ((win.top + y) * in_w + win.left) * kChannels,
                  static_cast<size_t>(out_w * kChannels));
    return out;
  }
  if (!cols_change) {  // the window's rows, each resampled
    out.rgb = resample_rows(src + win.top * in_w * kChannels, out_h, in_w, out_w,
                            resample_taps(in_w, width, win.left, out_w, filter));
    return out;
  }
  const ResampleTaps vt = resample_taps(in_h, height, win.top, out_h, filter);
  if (!rows_change) {  // every row the window reads, cut to its columns, then filtered down
    const int64_t row_lo = vt.first.front(), row_hi = vt.first.back() + vt.count.back();
    std::vector<uint8_t> cut(static_cast<size_t>((row_hi - row_lo) * out_w * kChannels));
    for (int64_t y = row_lo; y < row_hi; ++y)
      std::memcpy(cut.data() + (y - row_lo) * out_w * kChannels,
                  src + (y * in_w + win.left) * kChannels, static_cast<size_t>(out_w * kChannels));
    out.rgb = resample_columns(cut.data(), row_lo, out_w * kChannels, out_h, vt);
    return out;
  }
  const ResampleTaps ht = resample_taps(in_w, width, win.left, out_w, filter);
  if (height_first(in_h, in_w, height, width)) {
    const std::vector<uint8_t> cols = resample_columns(src, 0, in_w * kChannels, out_h, vt);
    out.rgb = resample_rows(cols.data(), out_h, in_w, out_w, ht);
  } else {
    // Width first, over only the rows the vertical pass reads (row_lo .. row_hi - 1).
    const int64_t row_lo = vt.first.front(), row_hi = vt.first.back() + vt.count.back();
    const std::vector<uint8_t> rows =
        resample_rows(src + row_lo * in_w * kChannels, row_hi - row_lo, in_w, out_w, ht);
    out.rgb = resample_columns(rows.data(), row_lo, out_w * kChannels, out_h, vt);
  }
  return out;
}

}  // namespace zt::data
