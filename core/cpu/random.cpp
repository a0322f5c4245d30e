// CPU random fills from core/rng.h's Philox stream; the twin of core/cuda/random.cu,
// which computes the same numbers. Element i reads stream position offset + i, so the
// result does not depend on how the work is split over threads.
#include "core/cpu/loops.h"
#include "core/kernels.h"
#include "core/rng.h"

namespace zt::cpu {

namespace {

// p[i] for i in [i0, i1): stream position offset + i of g, uniform in [lo, hi) or normal
// (mean lo, standard deviation hi). f32 draws are scaled in double and stored as float,
// f64 ones use the double draws (as the GPU does).
template <typename T>
void fill_range(T* p, int64_t i0, int64_t i1, const Generator& g, uint64_t offset, bool normal,
                double lo, double hi) {
  for (int64_t i = i0; i < i1; ++i) {
    const uint64_t pos = offset + static_cast<uint64_t>(i);
    if constexpr (std::is_same_v<T, double>) {
      p[i] = normal ? lo + hi * g.normal64(pos) : lo + (hi - lo) * g.uniform64(pos);
    } else {
      p[i] = static_cast<float>(normal ? lo + hi * static_cast<double>(g.normal(pos))
                                       : lo + (hi - lo) * static_cast<double>(g.uniform(pos)));
    }
  }
}

}  // namespace

void random_fill(const Tensor& out, uint64_t seed, uint64_t offset, bool normal, double a,
                 double b) {
  ZT_CHECK(out.is_contiguous(), "random_fill: expects a contiguous tensor");
  if (is_16bit_float(out.dtype())) {
    // An f32 fill, then one conversion pass (values stored through float, as specified).
    Tensor f = Tensor::empty(out.sizes(), DType::f32);
    random_fill(f, seed, offset, normal, a, b);
    copy(out, f);
    return;
  }
  const Generator g(seed);
  dispatch_f32_f64(out.dtype(), "random fill", [&]<typename T>() {
    T* p = out.data<T>();
    parallel_for(out.numel(), grain_for(64),
                 [&](int64_t i0, int64_t i1) { fill_range(p, i0, i1, g, offset, normal, a, b); });
  });
}

}  // namespace zt::cpu
