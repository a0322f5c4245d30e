// NumPy .npy files: a strict header reader, whole-array load/save, and NpyArray, a
// dataset over an (N, T, 3, H, W) array of clips. Legend: N clips, T frames, H/W size.
// Only little-endian, C-order arrays are read; anything else is an error naming the
// file and saying how to convert it.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "data/dataset.h"

namespace zt::data {

/// A parsed .npy header.
struct NpyHeader {
  std::string descr;      ///< e.g. "<f4", "|u1"
  char kind = 0;          ///< 'f' float, 'i' signed, 'u' unsigned, 'b' bool
  int64_t item_size = 0;  ///< bytes per element
  Shape shape;
  int64_t data_offset = 0;  ///< bytes before the data
  int64_t numel() const { return shape_numel(shape); }
};

/// Reads and validates the header of `path`: magic, version, dict keys, a supported
/// little-endian dtype, C order, and a file size matching shape x dtype exactly.
NpyHeader read_npy_header(const std::string& path);

/// Loads a whole array: f4 -> f32, f8 -> f64, i8 -> i64, i4 -> i32, b1 -> bool,
/// u1 -> i32 (widened; zt has no uint8 dtype), f2 -> f16.
Tensor load_npy(const std::string& path);
/// The bytes before the data of a version 1.0 .npy file of a C-order array of `dtype`
/// (f32, f64, f16, i64, i32, bool) and `sizes`: for a writer that streams the data after.
std::string npy_header(DType dtype, const Shape& sizes);
/// Writes a CPU or GPU tensor (f32, f64, f16, i64, i32, bool) as a version 1.0 .npy file,
/// atomically (write_file_atomically: an older file stays whole until the new one is complete).
void save_npy(const std::string& path, const Tensor& t);

/// Clips from an .npy array: (N, T, 3, H, W), or (N, 3, H, W) images repeated to
/// `frames`. dtype u1 (pixels: p / 127.5 - 1) or f4 (already in [-1, 1]: a clip with a
/// value outside is an error when it is read; a file whose sampled clips hold nothing
/// below 0, [0, 1] data most likely, earns a warning when opened).
/// Reads each clip from the file on demand, so arrays larger than memory work.
class NpyArray : public Dataset {
 public:
  explicit NpyArray(const std::string& path, int64_t frames = 4);
  int64_t size() const override { return header_.shape[0]; }
  Sample get(int64_t index) const override;
  std::string describe() const override;
  const NpyHeader& header() const { return header_; }

 private:
  void warn_if_unit_range() const;

  std::string path_;
  NpyHeader header_;
  int64_t frames_;
};

}  // namespace zt::data
