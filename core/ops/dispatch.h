// Device dispatch for the kernel table (core/kernels.h), shared by the op files. Each
// dispatch is counted (core/work_counts.h) and, while the thread runs a KernelProfile
// (core/kernel_profile.h), timed under the kernel's name.
#pragma once

#include "core/kernel_profile.h"
#include "core/kernels.h"
#include "core/work_counts.h"

namespace zt::detail {

#ifdef ZT_WITH_CUDA
#define ZT_DISPATCH(dev, fn, ...)                                                       \
  (++::zt::detail::thread_work_counts().dispatches,                                     \
   ::zt::detail::profiled(#fn, (dev), [&]() -> decltype(auto) {                         \
     return (dev).is_cuda() ? ::zt::cuda::fn(__VA_ARGS__) : ::zt::cpu::fn(__VA_ARGS__); \
   }))
#else
#define ZT_DISPATCH(dev, fn, ...)                   \
  (++::zt::detail::thread_work_counts().dispatches, \
   ::zt::detail::profiled(#fn, (dev),               \
                          [&]() -> decltype(auto) { return ::zt::cpu::fn(__VA_ARGS__); }))
#endif

/// Error unless all defined tensors share a device and dtype.
void check_same(const char* op, std::initializer_list<Tensor> ts, bool same_dtype = true);
/// Error naming `op` unless `t` is floating: arithmetic has no integer kernels (and no type
/// promotion), so an integer operand is named here rather than by the kernel it would reach.
void check_floating(const char* op, const Tensor& t);
/// Before an in-place write to `dst`: an error when grad mode is on and `dst` or `src`
/// requires grad or `dst` is a view made under a NoGradGuard of a tensor that requires
/// grad (autograd does not record in-place writes), when `dst` has elements that share
/// memory (an expand()ed view: stride 0 along a dim of size > 1), or (with `src`) when
/// both are dense and overlap in part (the result would depend on the order of the
/// writes; PyTorch refuses both). Then counts the write in dst's storage version; an op
/// makes every other check of its arguments before, so that a write refused leaves the
/// version as it was (autograd would take a later backward for a write).
void begin_write(const char* op, const Tensor& dst, const Tensor& src = Tensor());
/// The same for a write that reads several sources (a GEMM's operands), counted once.
void begin_write(const char* op, const Tensor& dst, std::initializer_list<Tensor> srcs);
/// begin_write's checks alone, for an op that checks more before it counts the write
/// (count_writes), or writes several tensors and checks them all first.
void check_write(const char* op, const Tensor& dst, const Tensor& src);
/// True when a and b reach into one range of a storage (a test of their first and last
/// elements' places, not of every element: x[::2] and x[1::2] share memory by it).
bool shares_memory(const Tensor& a, const Tensor& b);
/// The source of an in-place elementwise op, `src` broadcast to dst's shape (an error
/// naming `op` where it does not broadcast to it).
Tensor broadcast_source(const char* op, const Tensor& dst, const Tensor& src);
/// The source of an elementwise in-place write to `dst` (after begin_write, `src` already
/// of dst's shape): `src` itself, or a copy of it when the two reach into one range of a
/// storage without being the same elements in the same layout (x[::2] written from x[:3],
/// or from a broadcast column of x), whose elements the kernel could write before it
/// reads them.
Tensor unaliased_source(const Tensor& dst, const Tensor& src);
/// True when no two elements of `t` share a memory location (a sufficient test, which
/// every layout made by views other than expand() and as_strided() passes).
bool elements_apart(const Tensor& t);
/// Counts an in-place write in each defined tensor's storage version (kernels that update
/// tensors they were handed: random fills, optimizer updates).
void count_writes(const std::vector<Tensor>& ts);

/// 16-bit floating tensors as f32, others as they are: the operands of a result or a
/// gradient whose intermediates overflow or round away in 16 bits (a loss, x^-3/2 of a
/// small x, a count of 65520), rounded to the 16-bit type once at the end.
inline Tensor widened(const Tensor& t) {
  return is_16bit_float(t.dtype()) ? t.to(DType::f32) : t;
}

}  // namespace zt::detail
