// The dataset interface: an indexable collection of clips. Legend: T frames, H height,
// W width. Every clip is (T, 3, H, W) f32 in [-1, 1] (pixel p in [0, 255] maps to
// p / 127.5 - 1, Emu3's normalization); a still image is repeated along T.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace zt::data {

/// One item of a dataset.
struct Sample {
  Tensor clip;        ///< (T, 3, H, W) f32 in [-1, 1], contiguous, CPU
  int64_t label = 0;  ///< class id where the dataset has one (else 0)
  int64_t index = 0;  ///< the dataset index it came from
};

/// An indexable collection of clips. get() must be thread-safe: the loader calls it
/// from background threads, up to LoaderOptions::workers of them at once.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of samples.
  virtual int64_t size() const = 0;
  /// Sample `index` in [0, size()); deterministic for a given index.
  virtual Sample get(int64_t index) const = 0;
  /// A short description for logs ("SyntheticVideo(1024 x (4, 3, 32, 32))").
  virtual std::string describe() const = 0;
  /// Beyond describe(), what sample i is, as far as is cheap to tell without reading it:
  /// two processes whose datasets give the same describe() and identity() read the same
  /// samples (ranks compare them at the start). "" where describe() says it all.
  virtual std::string identity() const { return ""; }
};

/// A view of some of another dataset's samples (indices into it, in order).
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  /// The base sample at indices[index]; Sample::index stays the base index.
  Sample get(int64_t index) const override;
  std::string describe() const override;
  std::string identity() const override { return base_->identity(); }
  const Dataset& base() const { return *base_; }
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

/// Error unless `clip` is a (T, 3, H, W) f32 CPU tensor; `what` names its origin.
void check_clip(const Tensor& clip, const std::string& what);

}  // namespace zt::data
