// Depthwise CPU convolution (internal to core/cpu/conv.cpp): groups == C, each output
// channel oc reading input channel oc / (O / C), computed directly. See conv_depthwise.cpp.
#pragma once

#include "core/kernels.h"

namespace zt::cpu {

/// True for a depthwise geometry (groups == C > 1; any channel multiplier O / C).
bool depthwise_applies(const ConvGeometry& g);

/// out (N, O, Do, Ho, Wo) <- x (N, C, D, H, W), w (O, 1, k...), bias (O) or null.
template <typename T>
void depthwise_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* out);

/// grad_x like x (if non-null, overwritten) and grad_w like w (if non-null, overwritten)
/// from grad_out (N, O, Do, Ho, Wo).
template <typename T>
void depthwise_backward(const ConvGeometry& g, const T* grad_out, const T* x, const T* w, T* grad_x,
                        T* grad_w);

}  // namespace zt::cpu
