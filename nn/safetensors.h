// The safetensors format: an 8-byte little-endian header length n, n bytes of JSON
// ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"k": "v"}}), then the raw little-endian data; offsets are relative to
// the end of the header. Supported dtypes: F32, F16, BF16, F64, I64, I32, BOOL.
// Reading memory-maps the file and validates every offset, size and dtype against it
// before any tensor is touched: a bad file is a zt::Error naming the file and the
// problem, never a crash or an out-of-bounds read.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace zt::nn {

/// One tensor's entry in a safetensors header.
struct SafetensorsInfo {
  DType dtype = DType::f32;
  Shape shape;
  uint64_t data_begin = 0;  // byte offsets into the data section
  uint64_t data_end = 0;
};

/// A validated, memory-mapped safetensors file. Tensors from view() keep the mapping
/// alive after the SafetensorsFile is gone.
class SafetensorsFile {
 public:
  /// Maps and validates `path` (error naming the path and the first problem found).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  /// Tensor names in header order.
  const std::vector<std::string>& keys() const { return keys_; }
  bool contains(const std::string& key) const { return infos_.count(key) != 0; }
  /// dtype, shape and offsets of `key` (error listing a few keys if absent).
  const SafetensorsInfo& info(const std::string& key) const;
  /// The optional "__metadata__" string map.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// A fresh contiguous copy of `key` on `device`.
  Tensor get(const std::string& key, Device device = Device::cpu()) const;
  /// A zero-copy CPU tensor over the mapping (copy-on-write: writes never reach the file).
  /// Falls back to a copy when the data is not aligned for its dtype.
  Tensor view(const std::string& key) const;
  const std::string& path() const { return path_; }

 private:
  struct Mapping;
  const uint8_t* data_of(const SafetensorsInfo& info) const;
  std::string path_;
  std::shared_ptr<Mapping> map_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<std::string> keys_;
  std::map<std::string, SafetensorsInfo> infos_;
  std::map<std::string, std::string> metadata_;
};

/// Writes `tensors` (any device, any strides; names unique, not "__metadata__") and an
/// optional metadata map to `path`: written to a temporary file, then renamed, so the
/// file appears only when complete.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Every tensor of a safetensors file, copied, in header order.
NamedTensors load_safetensors(const std::string& path);

/// The safetensors dtype string ("F32", "BF16", ...) of a zt dtype.
const char* safetensors_dtype_name(DType t);

}  // namespace zt::nn
