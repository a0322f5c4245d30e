// CPU convolution kernels: vol2col (im2col generalised to 3-D) + BLAS GEMM forward,
// and GEMM + col2vol backward. 2-D convolutions run the same path with D = kd = 1.
// Legend: N batch, C input channels, O output channels, D/H/W input depth/height/width,
// Do/Ho/Wo output sizes, kd/kh/kw kernel sizes, L = Do*Ho*Wo, K = C*kd*kh*kw.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace zt::cpu {

/// The geometry of one convolution call (already validated by the op).
struct ConvGeometry {
  int64_t n = 1, c = 1, o = 1;              // batch, in channels, out channels
  int64_t d = 1, h = 1, w = 1;              // input spatial sizes
  int64_t kd = 1, kh = 1, kw = 1;           // kernel sizes
  int64_t sd = 1, sh = 1, sw = 1;           // strides
  int64_t pad_d = 0, pad_h = 0, pad_w = 0;  // front/top/left padding (zeros)
  int64_t od = 1, oh = 1, ow = 1;           // output spatial sizes

  /// Rows of the column matrix: C * kd * kh * kw.
  int64_t col_rows() const { return c * kd * kh * kw; }
  /// Output positions per sample: Do * Ho * Wo.
  int64_t out_positions() const { return od * oh * ow; }
  /// Input positions per sample: D * H * W.
  int64_t in_positions() const { return d * h * w; }
  /// True when the column matrix of a sample is the sample itself (1x1x1, stride 1,
  /// no padding on either side), so the GEMM reads the input directly.
  bool is_pointwise() const {
    return kd == 1 && kh == 1 && kw == 1 && sd == 1 && sh == 1 && sw == 1 && pad_d == 0 &&
           pad_h == 0 && pad_w == 0 && od == d && oh == h && ow == w;
  }
};

/// out (N, O, Do, Ho, Wo) = conv(x (N, C, D, H, W), weight (O, C, kd, kh, kw)) + bias (O).
/// All tensors contiguous, f32 or f64, one dtype; bias may be undefined.
void conv_forward(const ConvGeometry& g, const Tensor& out, const Tensor& x, const Tensor& weight,
                  const Tensor& bias);

/// Gradients of conv_forward from grad_out (N, O, Do, Ho, Wo): grad_x like x,
/// grad_weight like weight, grad_bias (O). Each output may be undefined (not wanted);
/// defined outputs are contiguous and fully overwritten.
void conv_backward(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                   const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                   const Tensor& grad_bias);

}  // namespace zt::cpu
