// CPU random fills from core/rng.h's Philox stream; the twin of core/cuda/random.cu,
// which computes the same numbers. Element i reads stream position offset + i, so the
// result does not depend on how the work is split over threads.
#include "core/cpu/loops.h"
#include "core/kernels.h"
#include "core/rng.h"

namespace zt::cpu {

void random_fill(const Tensor& out, uint64_t seed, uint64_t offset, bool normal, double a,
                 double b) {
  ZT_CHECK(out.is_contiguous(), "random_fill: expects a contiguous tensor");
  const Generator g(seed);
  dispatch_floating(out.dtype(), "random fill", [&]<typename T>() {
    T* p = out.data<T>();
    parallel_for(out.numel(), grain_for(64), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const uint64_t pos = offset + static_cast<uint64_t>(i);
        if constexpr (std::is_same_v<T, double>) {
          p[i] = normal ? a + b * g.normal64(pos) : a + (b - a) * g.uniform64(pos);
        } else {
          // f32 draws, scaled in double, stored through float (as the GPU does).
          const double v = normal ? a + b * static_cast<double>(g.normal(pos))
                                  : a + (b - a) * static_cast<double>(g.uniform(pos));
          p[i] = T(static_cast<float>(v));
        }
      }
    });
  });
}

}  // namespace zt::cpu
