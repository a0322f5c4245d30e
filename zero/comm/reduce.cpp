// Fixed-order reductions. Blocks of kBlock elements are accumulated in a stack buffer of
// the accumulation type, rank by rank, then written once: this keeps the order fixed,
// rounds bf16/f16 only at the end, and lets out alias an input.
#include "zero/comm/reduce.h"

#include <algorithm>
#include <type_traits>

namespace zt::comm {

namespace {
constexpr int64_t kBlock = 1024;

template <typename T>
struct Acc {
  using type = acc_t<T>;
};
template <>
struct Acc<bool> {
  using type = bool;
};

template <typename T>
void reduce_typed(ReduceOp op, T* out, const void* const* ins, int n_ins, int64_t count) {
  using A = typename Acc<T>::type;
  A acc[kBlock];
  for (int64_t b0 = 0; b0 < count; b0 += kBlock) {
    const int64_t m = std::min(kBlock, count - b0);
    const T* first = static_cast<const T*>(ins[0]) + b0;
    for (int64_t i = 0; i < m; ++i) acc[i] = static_cast<A>(first[i]);
    for (int j = 1; j < n_ins; ++j) {
      const T* x = static_cast<const T*>(ins[j]) + b0;
      if constexpr (std::is_same_v<T, bool>) {
        for (int64_t i = 0; i < m; ++i) acc[i] = acc[i] || x[i];
      } else if (op == ReduceOp::kMax) {
        for (int64_t i = 0; i < m; ++i) {
          A v = static_cast<A>(x[i]);
          acc[i] = v > acc[i] || v != v ? v : acc[i];  // a NaN on any rank wins (torch's)
        }
      } else if constexpr (std::is_integral_v<A>) {
        // Integers wrap on overflow, as NCCL's do (a signed overflow is undefined in C++).
        using U = std::make_unsigned_t<A>;
        for (int64_t i = 0; i < m; ++i)
          acc[i] = static_cast<A>(static_cast<U>(acc[i]) + static_cast<U>(static_cast<A>(x[i])));
      } else {
        for (int64_t i = 0; i < m; ++i) acc[i] += static_cast<A>(x[i]);
      }
    }
    if constexpr (!std::is_same_v<T, bool>) {
      if (op == ReduceOp::kAvg) {
        const A d = static_cast<A>(n_ins);
        for (int64_t i = 0; i < m; ++i) acc[i] = acc[i] / d;
      }
    }
    T* o = out + b0;
    for (int64_t i = 0; i < m; ++i) o[i] = static_cast<T>(acc[i]);
  }
}
}  // namespace

void reduce_buffers(DType dtype, ReduceOp op, void* out, const void* const* ins, int n_ins,
                    int64_t count) {
  ZT_CHECK(n_ins >= 1, "reduce_buffers: no inputs");
  ZT_CHECK(dtype != DType::b8 || op == ReduceOp::kMax, "reduce: bool supports max only");
  dispatch_all(dtype,
               [&]<typename T>() { reduce_typed<T>(op, static_cast<T*>(out), ins, n_ins, count); });
}

}  // namespace zt::comm
