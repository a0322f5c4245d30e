// Tensor factories and the seeded random generators.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace zt {

/// A contiguous tensor of `sizes`, its values unset.
Tensor empty(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
/// A contiguous tensor of `sizes` filled with 0.
Tensor zeros(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
/// A contiguous tensor of `sizes` filled with 1.
Tensor ones(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
/// A contiguous tensor of `sizes` filled with `value` (converted to dtype).
Tensor full(const Shape& sizes, double value, DType dtype = DType::f32,
            Device device = Device::cpu());
/// zeros of t's shape, dtype and device.
Tensor zeros_like(const Tensor& t);
/// ones of t's shape, dtype and device.
Tensor ones_like(const Tensor& t);
/// [start, end) with step, 1-D: ceil((end - start) / step) elements (none when that is
/// not positive), element i = start + i * step in double; step must be non-zero.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32,
              Device device = Device::cpu());
/// A tensor holding `values` (row-major) with `sizes`.
Tensor from_vector(const std::vector<double>& values, const Shape& sizes, DType dtype = DType::f32,
                   Device device = Device::cpu());
/// A 0-dim tensor.
Tensor scalar_tensor(double value, DType dtype = DType::f32, Device device = Device::cpu());

// Random: the i-th element depends only on (seed, offset, i), so every rank and
// both devices produce the same numbers from the same generator state.
/// U[0, 1) from g, floating dtypes.
Tensor rand(const Shape& sizes, Generator& g, DType dtype = DType::f32,
            Device device = Device::cpu());
/// N(0, 1) from g, floating dtypes.
Tensor randn(const Shape& sizes, Generator& g, DType dtype = DType::f32,
             Device device = Device::cpu());
/// U[0, 1) from default_generator().
Tensor rand(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
/// N(0, 1) from default_generator().
Tensor randn(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
/// Fills a floating t in place with U[lo, hi) (lo <= hi, both finite), not recorded by
/// autograd (allowed on parameters, as nn.init's).
void uniform_(const Tensor& t, double lo, double hi, Generator& g = default_generator());
/// Fills a floating t in place with N(mean, std) (mean finite, std finite and >= 0), not
/// recorded by autograd.
void normal_(const Tensor& t, double mean, double std, Generator& g = default_generator());
/// Random integers in [lo, hi) (hi > lo), an i64 tensor on the CPU only.
Tensor randint(int64_t lo, int64_t hi, const Shape& sizes, Generator& g = default_generator());

}  // namespace zt
