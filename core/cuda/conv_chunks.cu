// Convolutions of batches past cuDNN's largest tensor (conv_chunks.h): consecutive chunks of
// samples, each one call of conv.cu's launchers on views of the batch's rows.
#include "core/cuda/conv_chunks.h"

#include <algorithm>

#include "core/cuda/stream.h"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

// Samples per cuDNN call of the geometry: g.n unless the batch's input or output passes
// cuDNN's 2^31 - 1 elements.
int64_t batch_chunk(const ConvGeometry& g) {
  return conv_batch_chunk(g.n, g.c * g.in_positions(), g.o * g.out_positions());
}

// The geometry of `count` of g's samples, and a batch-major tensor's rows [n0, n0 + count)
// (an undefined tensor stays undefined).
ConvGeometry samples_of(const ConvGeometry& g, int64_t count) {
  ConvGeometry s = g;
  s.n = count;
  return s;
}
Tensor rows_of(const Tensor& t, int64_t n0, int64_t count) {
  return t.defined() ? t.narrow(0, n0, count) : t;
}

}  // namespace

bool conv_forward_in_chunks(const ConvGeometry& g, const Tensor& out, const Tensor& x,
                            const Tensor& weight, const Tensor& bias) {
  const int64_t chunk = batch_chunk(g);
  if (chunk >= g.n) return false;
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t count = std::min(chunk, g.n - n0);
    conv_forward(samples_of(g, count), rows_of(out, n0, count), rows_of(x, n0, count), weight,
                 bias);
  }
  return true;
}

bool conv_backward_in_chunks(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                             const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                             const Tensor& grad_bias) {
  const int64_t chunk = batch_chunk(g);
  if (chunk >= g.n) return false;
  DeviceGuard guard(grad_out.device().index);
  if (grad_bias.defined()) conv_bias_gradient(g, grad_out, grad_bias);
  const bool gw = grad_weight.defined(), wide = gw && is_16bit_float(grad_weight.dtype());
  // The weight gradient's running sum, and one chunk's share of it where that is not the sum.
  const Tensor sum =
      wide ? Tensor::empty(grad_weight.sizes(), DType::f32, grad_weight.device()) : grad_weight;
  Tensor part;
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t count = std::min(chunk, g.n - n0);
    const bool into_sum = n0 == 0 && !wide;  // the first chunk writes the sum itself
    if (gw && !into_sum && !part.defined())
      part = Tensor::empty(grad_weight.sizes(), grad_weight.dtype(), grad_weight.device());
    conv_backward(samples_of(g, count), rows_of(grad_out, n0, count), rows_of(x, n0, count), weight,
                  rows_of(grad_x, n0, count), gw ? (into_sum ? sum : part) : Tensor(), Tensor());
    if (!gw || into_sum) continue;
    if (n0 == 0)
      copy(sum, part);
    else
      multi_copy({sum}, {part}, /*accumulate=*/true);
  }
  if (wide) copy(grad_weight, sum);
  return true;
}

}  // namespace zt::cuda
