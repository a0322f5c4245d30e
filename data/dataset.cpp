// Subset and the clip shape check shared by every dataset and the loader.
#include "data/dataset.h"

#include "core/error.h"

namespace zt::data {

void check_clip(const Tensor& clip, const std::string& what) {
  ZT_CHECK(clip.defined(), what, ": no clip tensor");
  ZT_CHECK(clip.dim() == 4 && clip.size(1) == 3, what, ": a clip must be (T, 3, H, W), got ",
           shape_str(clip.sizes()));
  ZT_CHECK(clip.dtype() == DType::f32, what, ": a clip must be f32, got ",
           dtype_name(clip.dtype()));
  ZT_CHECK(!clip.is_cuda(), what, ": datasets produce CPU clips; move batches to the GPU");
}

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  ZT_CHECK(base_ != nullptr, "Subset: no base dataset");
  for (int64_t i : indices_)
    ZT_CHECK(i >= 0 && i < base_->size(), "Subset: index ", i, " is outside ", base_->describe(),
             " (size ", base_->size(), ")");
}

Sample Subset::get(int64_t index) const {
  ZT_CHECK(index >= 0 && index < size(), "Subset: index ", index, " out of range [0, ", size(),
           ")");
  return base_->get(indices_[static_cast<size_t>(index)]);
}

std::string Subset::describe() const {
  return "Subset(" + std::to_string(indices_.size()) + " of " + base_->describe() + ")";
}

}  // namespace zt::data
