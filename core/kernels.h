// The device kernel table. Ops (core/ops/*.cpp) validate arguments, allocate outputs
// and record autograd, then call the kernel of the tensors' device (ZT_DISPATCH in
// core/ops/dispatch.h); kernels only compute. Both devices implement one list
// (core/kernel_list.h, included below into zt::cpu and zt::cuda), with the same names,
// arguments and contracts, in files of the same names: core/cpu/index.cpp beside
// core/cuda/index.cu, and so on. The CPU kernels are the specification. Outputs of unary,
// binary, axpy, copy and fill may be strided views (the in-place ops write through them);
// every other kernel takes a contiguous, preallocated output. Elementwise inputs may be
// strided (broadcast inputs arrive as expand()ed views with zero strides).
#pragma once

#include <array>
#include <cstdint>

#include "core/ops/norm.h"
#include "core/tensor.h"

namespace zt {

// One line per group of ops.
// clang-format off
enum class UnaryOp : uint8_t {
  kNeg, kExp, kLog, kSqrt, kRsqrt, kAbs, kRelu, kSilu, kSigmoid, kTanh, kGelu, kGeluTanh,
  kPow,       // x^p0
  kClamp,     // min(max(x, p0), p1)
  kAffine,    // x * p0 + p1
  kSign,
};

enum class BinaryOp : uint8_t {
  kAdd, kSub, kMul, kDiv,
  kEq, kNe, kLt, kLe, kGt, kGe,  // bool output
  // backward helpers: (a = upstream grad, b = saved input or output)
  kReluGrad,      // b <= 0 ? 0 : a, b = x (a NaN x passes a, as PyTorch's)
  kSiluGrad,      // a * s (1 + b (1 - s)), s = sigmoid(b), b = x
  kSigmoidGrad,   // a * b (1 - b), b = y
  kTanhGrad,      // a * (1 - b^2), b = y
  kGeluGrad,      // a * d/dx gelu(b), b = x (erf form)
  kGeluTanhGrad,  // tanh approximation
};
// clang-format on

/// The op an index_rows_add serves, for its errors: the backward of index_select (and
/// embedding), whose forward already reported any index out of range, or bincount, which
/// nothing before it checked on a GPU (its kernel reports a bad id there).
enum class IndexAddOp : uint8_t { kIndexSelectBackward, kBincount };

/// The geometry of one convolution call (already validated by the op). 2-D
/// convolutions have D = kd = 1. Legend: N batch, C input channels, O output channels,
/// D/H/W input sizes, Do/Ho/Wo output sizes, kd/kh/kw kernel sizes.
struct ConvGeometry {
  int64_t n = 1, c = 1, o = 1;              // batch, in channels, out channels
  int64_t d = 1, h = 1, w = 1;              // input spatial sizes
  int64_t kd = 1, kh = 1, kw = 1;           // kernel sizes
  int64_t sd = 1, sh = 1, sw = 1;           // strides
  int64_t pad_d = 0, pad_h = 0, pad_w = 0;  // front/top/left padding (zeros)
  int64_t od = 1, oh = 1, ow = 1;           // output spatial sizes
  int64_t dd = 1, dh = 1, dw = 1;           // dilations (tap spacing)
  int64_t groups = 1;  // channel groups: group i maps input channels [i*C/G, (i+1)*C/G)
                       // to output channels [i*O/G, (i+1)*O/G); weight (O, C/G, k...)

  /// Rows of the column matrix: C * kd * kh * kw (of one group when groups > 1: C/G).
  int64_t col_rows() const { return c / groups * kd * kh * kw; }
  /// True with unit dilation along every axis.
  bool is_dense() const { return dd == 1 && dh == 1 && dw == 1; }
  /// One group's convolution: C/G inputs, O/G outputs, groups = 1.
  ConvGeometry group() const {
    ConvGeometry s = *this;
    s.c = c / groups;
    s.o = o / groups;
    s.groups = 1;
    return s;
  }
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

/// CPU kernels (core/cpu/).
namespace cpu {
#include "core/kernel_list.h"
}  // namespace cpu

#ifdef ZT_WITH_CUDA
/// CUDA kernels (core/cuda/): the same list, on the tensors' GPU and its current stream.
namespace cuda {
#include "core/kernel_list.h"

// CUDA only: host <-> device copies of contiguous bytes, for Tensor::copy_. An upload is
// queued on the stream from pageable host memory, which the caller may free on return (no
// host wait); a download waits for it to land.
void memcpy_h2d(void* dst, const void* src, size_t bytes);
void memcpy_d2h(void* dst, const void* src, size_t bytes);
}  // namespace cuda
#endif

}  // namespace zt
