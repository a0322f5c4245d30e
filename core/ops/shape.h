// Shape-changing ops that copy (pad, interpolate, repeat, cat, stack) and the
// view-returning split/chunk.
#pragma once

#include "core/tensor.h"

namespace zt {

/// Constant pad. `pads` lists (before, after) pairs starting from the LAST dim, as
/// torch.nn.functional.pad: {left, right, top, bottom, front, back, ...}.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0.0);
/// Nearest-neighbour resize of the trailing spatial dims of (N, C, *spatial) to `size`
/// (1, 2 or 3 spatial dims; a time-only resize is a 3-D resize keeping H and W).
Tensor interpolate_nearest(const Tensor& x, const Shape& size);
/// Repeats each element `repeats` times along dim (f0,f0,f1,f1,...).
Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim);
/// Tiles the tensor `repeats[d]` times along each dim.
Tensor repeat(const Tensor& x, const Shape& repeats);
/// Joins xs (at least one; one dtype, one device, at least 1-D, equal sizes except at
/// dim) along dim: the sizes at dim add up.
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
/// Joins xs (at least one, all of one shape, dtype and device) along a new dim inserted
/// at `dim`: (S...) -> (S[:dim]..., len(xs), S[dim:]...).
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
/// Views of consecutive pieces of `size` (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);
/// Views of ceil(n / chunks) elements (the last may be smaller, so there may be fewer than
/// `chunks`), or `chunks` empty views of an empty dim, as torch.chunk.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);

}  // namespace zt
