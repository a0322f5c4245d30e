// Argument checks for kernel-table entries (core/kernel_list.h) whose CPU and CUDA
// kernels share a contract beyond "contiguous, one dtype": both devices' kernels call
// these, so a bad call gives the same message on either.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace zt::detail {

/// An optimizer kernel's lists (adam_update, sgd_update): every list as long as p, all
/// tensors contiguous on p[0]'s device with p[0]'s dtype (f32 or f64) and their
/// parameter's numel; `low` empty or one bf16/f16 tensor (one dtype) or undefined per
/// parameter. Returns the copies' dtype, or the parameters' dtype when there are none.
DType check_optimizer_lists(const char* op, const std::vector<Tensor>& p,
                            std::initializer_list<const std::vector<Tensor>*> same,
                            const std::vector<Tensor>& low);
/// check_optimizer_lists for sgd_update: g, and buf unless it is empty (no momentum).
DType check_sgd_lists(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                      const std::vector<Tensor>& buf, const std::vector<Tensor>& low);

/// multi_copy's pairs (core/kernel_list.h): as many dst as src, each pair contiguous, of
/// one numel, on dst[0]'s device; every dst of dst[0]'s dtype, every src of src[0]'s, both
/// floating, or one non-floating dtype when not accumulating.
void check_multi_copy(const std::vector<Tensor>& dst, const std::vector<Tensor>& src,
                      bool accumulate);

/// An optimizer kernel's `constants`: undefined, or `count` contiguous f64 values on
/// `device`. Returns their host copy when they are on the CPU (else empty).
std::vector<double> check_step_constants(const char* op, const Tensor& constants, int64_t count,
                                         Device device);

/// cross_entropy_forward / backward: logits (P, C), lse (P) f64 and target (P), all
/// contiguous.
void check_cross_entropy(const char* op, const Tensor& lse, const Tensor& logits,
                         const Tensor& target);
/// stats: the (3) f64 contiguous record of cross_entropy_forward.
void check_cross_entropy_stats(const char* op, const Tensor& stats);
/// cross_entropy_backward's grad (a one-element f64 tensor) and dlogits (contiguous, of
/// the logits' shape and dtype).
void check_cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& grad);

}  // namespace zt::detail
