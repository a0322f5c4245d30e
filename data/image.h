// Images: decoding (PNG/JPEG/BMP/... through stb_image), resizing (Pillow's resampling,
// data/resample.h), Emu3's pixel normalization, PNG writing and clip grids for logs.
// An Image is H x W x 3 uint8, row-major (HWC), the layout files use.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "data/image_options.h"

namespace zt::data {

/// An RGB image, H x W x 3 bytes (HWC).
struct Image {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> rgb;
};

/// Decodes an image file as RGB (grey and alpha are converted). An unreadable file is an
/// error naming it and stb's reason; one whose header reads but whose data does not decode
/// is called corrupt or truncated.
Image load_image(const std::string& path);
/// load_image without that error: false, with `why` set to the reason (without the path:
/// "corrupt or truncated file (...)"), when the file cannot be decoded. An image too large
/// to decode is still an error.
bool try_load_image(const std::string& path, Image& img, std::string& why);
/// Reads only the header: {height, width}. Error naming the file if it is not an image.
std::pair<int64_t, int64_t> image_size(const std::string& path);

/// Resamples to height x width, byte for byte what Pillow 13's Image.resize((width, height),
/// BILINEAR or BICUBIC) gives (bilinear: triangle filter; bicubic: Keys' cubic, a = -0.5),
/// antialiased when shrinking (data/resample.h). The image itself when the size is unchanged.
Image resize_image(const Image& img, int64_t height, int64_t width, Filter filter);
/// height x width from img by `fit` (a no-op at that size already).
Image fit_image(const Image& img, int64_t height, int64_t width, Filter filter, Fit fit);

/// Emu3's target size: H and W rounded (halves to even, as Python's round) to multiples
/// of `factor`, then scaled (keeping the aspect ratio) into [min_area, max_area] pixels
/// when those are > 0.
std::pair<int64_t, int64_t> emu3_target_size(int64_t height, int64_t width, int64_t factor = 8,
                                             int64_t min_area = 0, int64_t max_area = 0);

/// Image -> (3, H, W) f32 with p / 127.5 - 1 (values in [-1, 1]).
Tensor image_to_tensor(const Image& img);
/// (3, H, W) in [-1, 1] -> Image: (x * 0.5 + 0.5) * 255, rounded and clipped.
Image tensor_to_image(const Tensor& chw);

/// Writes a PNG atomically (write_file_atomically: the old file, if any, stays whole until
/// the new one is complete). Error naming the file if it cannot be written.
void save_png(const std::string& path, const Image& img);
/// The bytes of a PNG file holding `img` (what save_png writes), for embedding elsewhere.
/// An image of more than 2^30 bytes of rows ((3 x width + 1) x height) is an error.
std::vector<uint8_t> encode_png(const Image& img);

/// A grid of frames for eyeballing: for each clip b, one row per tensor in `clips`
/// (so [inputs, reconstructions] interleaves them), one column per frame t.
/// clips: each (B, T, 3, H, W) (or (B, 3, H, W): one frame) in [-1, 1], same shape.
/// `pad` pixels of grey between cells.
Image make_grid(const std::vector<Tensor>& clips, int64_t pad = 2);

}  // namespace zt::data
