// Tensor factories and the seeded random generators.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace zt {

Tensor empty(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor zeros(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor full(const Shape& sizes, double value, DType dtype = DType::f32,
            Device device = Device::cpu());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
/// [start, end) with step, 1-D.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32,
              Device device = Device::cpu());
/// A tensor holding `values` (row-major) with `sizes`.
Tensor from_vector(const std::vector<double>& values, const Shape& sizes, DType dtype = DType::f32,
                   Device device = Device::cpu());
/// A 0-dim tensor.
Tensor scalar_tensor(double value, DType dtype = DType::f32, Device device = Device::cpu());

// Random: the i-th element depends only on (seed, offset, i), so every rank and
// both devices produce the same numbers from the same generator state.
Tensor rand(const Shape& sizes, Generator& g, DType dtype = DType::f32,
            Device device = Device::cpu());  // U[0, 1)
Tensor randn(const Shape& sizes, Generator& g, DType dtype = DType::f32,
             Device device = Device::cpu());  // N(0, 1)
Tensor rand(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor randn(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
/// In place, not recorded: U[lo, hi) and N(mean, std).
void uniform_(const Tensor& t, double lo, double hi, Generator& g = default_generator());
void normal_(const Tensor& t, double mean, double std, Generator& g = default_generator());
/// Random integers in [lo, hi), i64.
Tensor randint(int64_t lo, int64_t hi, const Shape& sizes, Generator& g = default_generator());

}  // namespace zt
