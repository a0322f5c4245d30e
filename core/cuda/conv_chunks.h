// How many samples one cuDNN convolution call may take (core/cuda/conv.cu). cuDNN refuses
// a tensor descriptor of 2^31 elements or more (cudnnSetTensorNdDescriptor answers "not
// supported"), so a batch whose input or output passes that runs as consecutive chunks of
// samples, each a call of its own: a VAE decoder's 64 x 128 x 512 x 512 activation
// (2^31 elements, 4 GiB in bf16) is one such. conv_batch_chunk is pure C++, so that the
// CPU suite checks it (tests/core/test_conv_chunks.cpp); the chunked launchers
// (conv_chunks.cu) run in CUDA builds only.
// Legend: N batch; a sample's elements: C D H W of the input, O Do Ho Wo of the output.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/kernels.h"

namespace zt::cuda {

/// The most elements cuDNN takes in one tensor: 2^31 - 1.
constexpr int64_t kMaxCudnnElements = INT32_MAX;

/// Samples per cuDNN call for a batch of n samples of `x_sample` input and `y_sample`
/// output elements: n when the whole batch fits kMaxCudnnElements, else the most samples
/// that do (at least 1: a single sample past the limit is refused by name when its
/// descriptor is made, cudnn.h's packed_strides).
inline int64_t conv_batch_chunk(int64_t n, int64_t x_sample, int64_t y_sample) {
  const int64_t sample = std::max<int64_t>({x_sample, y_sample, 1});
  const int64_t fits = kMaxCudnnElements / sample;  // divided, so no product can overflow
  return n <= fits ? n : std::max<int64_t>(fits, 1);
}

/// conv_forward (core/kernels.h) as chunks of conv_batch_chunk samples, each a call of
/// conv_forward; false, having done nothing, when the batch fits one call.
bool conv_forward_in_chunks(const ConvGeometry& g, const Tensor& out, const Tensor& x,
                            const Tensor& weight, const Tensor& bias);
/// conv_backward as chunks of samples: the bias gradient over the whole batch
/// (conv_bias_gradient), then a call per chunk, each writing its rows of the input gradient
/// and its share of the weight gradient, which are added up (in f32 for 16-bit dtypes,
/// rounded once at the end); false, having done nothing, when the batch fits one call.
bool conv_backward_in_chunks(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                             const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                             const Tensor& grad_bias);
/// grad_bias (O) = grad_out (N, O, L) summed over n and l, for any size (64-bit indices):
/// conv_backward's bias gradient (conv.cu).
void conv_bias_gradient(const ConvGeometry& g, const Tensor& grad_out, const Tensor& grad_bias);

}  // namespace zt::cuda
