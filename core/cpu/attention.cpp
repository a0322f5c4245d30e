// CPU softmax for attention scores: scale, causal mask and softmax in one pass over
// each row, so no mask tensor and no scaled copy of the scores exist. The twin of
// core/cuda/attention.cu. As softmax_forward: the max in the scores' dtype, the sum of
// exp(x - max) in double, outputs in the scores' dtype; rows are independent and each
// is reduced in a fixed order, so results do not depend on the number of threads. f32
// rows go through softmax_row_f32 (cpu/norm_sums.h: lanes.h's SIMD exp, the max and the
// sum in independent lanes).
// Legend: R rows (queries of every batch entry), L keys per row.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/cpu/loops.h"
#include "core/cpu/norm_sums.h"
#include "core/kernels.h"

namespace zt::cpu {

void attention_softmax_forward(const Tensor& y, const Tensor& x, int64_t R, int64_t L, double scale,
                               bool causal) {
  ZT_CHECK(!causal || (L > 0 && R % L == 0), "attention softmax: causal rows (", R,
           ") must be a multiple of the keys per row (", L, ")");
  dispatch_f32_f64(x.dtype(), "attention softmax", [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const T s = static_cast<T>(scale);
    parallel_for(R, grain_for(L), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = px + r * L;
        T* yr = py + r * L;
        const int64_t kept = causal ? r % L + 1 : L;  // keys [0, kept) are visible
        for (int64_t l = kept; l < L; ++l) yr[l] = T(0);
        if constexpr (std::is_same_v<T, float>) {
          softmax_row_f32(yr, xr, kept, s);
          continue;
        }
        T mx = -INFINITY;
        for (int64_t l = 0; l < kept; ++l) mx = std::max(mx, xr[l] * s);
        if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: avoid inf - inf
        double sum = 0;
        for (int64_t l = 0; l < kept; ++l) sum += static_cast<double>(std::exp(xr[l] * s - mx));
        const T inv = static_cast<T>(1.0 / sum);
        for (int64_t l = 0; l < kept; ++l) yr[l] = std::exp(xr[l] * s - mx) * inv;
      }
    });
  });
}

}  // namespace zt::cpu
