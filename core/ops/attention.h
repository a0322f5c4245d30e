// Scaled dot-product attention as one op, in one of two ways, forward and backward:
// - the GEMM path: two batched GEMMs (the first applying the scale) around a fused
//   causal-mask / softmax kernel, with no per-head or per-sample loops and no mask tensor;
// - the fused (flash) path for 16-bit inputs: one kernel per pass that never stores
//   the Tq x Tk scores (core/cuda/flash_tiles.h), on a GPU's tensor cores.
// Legend: ... leading (batch, head) dims, flattened to B; Tq queries, Tk keys, D the
// query/key dim, Dv the value dim.
#pragma once

#include <optional>
#include <string>

#include "core/tensor.h"

namespace zt {

/// Which way scaled_dot_product_attention runs.
enum class AttentionKernel {
  automatic,  ///< fused on a GPU where supported, the GEMM path everywhere else
  flash,      ///< fused wherever supported, the CPU included (an emulation of the GPU
              ///< kernels, for tests: slow); the GEMM path for the rest
  math,       ///< always the GEMM path
};
/// The process-wide choice; it starts from the environment variable ZT_ATTENTION
/// (auto, flash or math; automatic when unset) and a bad value is an error there.
AttentionKernel attention_kernel();
void set_attention_kernel(AttentionKernel kernel);
/// "auto", "flash" or "math", and back (a clear error for anything else).
const char* attention_kernel_name(AttentionKernel kernel);
AttentionKernel parse_attention_kernel(const std::string& name);
/// Whether the current choice runs the fused kernels for q, k and v of this device, dtype
/// and head dim (in the layouts a (B, T, H * D) projection's head views have): what
/// scaled_dot_product_attention decides before it looks at the tensors' shapes and strides.
bool fused_attention_applies(Device device, DType dtype, int64_t head_dim);

/// softmax(scale * q @ k^T [causal mask]) @ v for q (..., Tq, D), k (..., Tk, D) and
/// v (..., Tk, Dv) with the same leading dims (any number, none included) -> (..., Tq,
/// Dv). causal: query i sees keys j <= i only (needs Tq == Tk). scale defaults to
/// 1 / sqrt(D). Inputs may be strided views (transposed matrices and a regular batch
/// stride are read in place; other layouts are copied); where q is transposed (unit
/// stride along T) the output is too, and so is each transposed input's gradient, as the
/// tokens of a (N, C, HW) feature map: its convolutions read them without a copy. f32 and f64; bf16
/// and f16 multiply in their dtype and take the softmax in f32. Differentiable in q, k and v.
///
/// The fused path takes bf16 or f16 q, k, v with at most two leading dims, one head dim
/// D = Dv of 32, 64, 96 or 128, the last dim contiguous, other strides multiples of 8 and
/// 16-byte aligned data (the (B, H, T, D) head views of a (B, T, H * D) projection
/// qualify); its output and gradients keep their inputs' layouts (so the heads' view
/// merges back without a copy). It rounds the probabilities to 16 bits before their
/// product with v, as FlashAttention does; the GEMM path rounds them to 16 bits too.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace zt
