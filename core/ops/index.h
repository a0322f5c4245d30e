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
/// Counts of each id of `ids` (i64 or i32, any shape) in [0, classes): (classes,) f64, on
/// the ids' device. With `weight` (one floating element on that device) each id adds the
/// weight instead of 1, so a 0/1 flag computed on a GPU gates the counts without the host
/// reading it. Counts are exact below 2^53; an id outside the range is an error (on a
/// GPU, reported at the host's next wait on it, as every index op's).
Tensor bincount(const Tensor& ids, int64_t classes, const Tensor& weight = Tensor());

}  // namespace zt
