// Indexing: index_select/embedding and gather. Indices are i64 (or i32).
#pragma once

#include "core/tensor.h"

namespace zt {

/// Slices of x along dim picked by 1-D `index`: x's shape with len(index) at dim;
/// the gradient scatter-adds back.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// weight (V, E), ids (...) -> (..., E).
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// out[i][j] = x[i][index[i][j]] along dim (torch.gather semantics): index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// One-hot of i64 or i32 ids: (...,) -> (..., classes) f32.
Tensor one_hot(const Tensor& ids, int64_t classes);

}  // namespace zt
