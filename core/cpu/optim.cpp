// CPU optimizer kernels: Adam/AdamW and SGD as one loop per parameter over contiguous
// f32/f64 arrays (parallel over blocks of elements), writing the optional bf16/f16 copy
// of each block right after updating it, while the block is still in cache.
#include <cmath>

#include "core/kernel_checks.h"
#include "core/kernels.h"
#include "core/parallel.h"

namespace zt::cpu {

namespace {

// low[b, e) = p[b, e) rounded through float to the 16-bit type of `low`.
template <typename T>
void write_low(const Tensor& low, const T* p, int64_t b, int64_t e) {
  if (low.dtype() == DType::bf16) {
    bf16* o = low.data<bf16>();
    for (int64_t i = b; i < e; ++i) o[i] = bf16(static_cast<float>(p[i]));
  } else {
    f16* o = low.data<f16>();
    for (int64_t i = b; i < e; ++i) o[i] = f16(static_cast<float>(p[i]));
  }
}

// The constants of one Adam step in the parameter's type. 1 - beta is taken in double
// and rounded once, as PyTorch's scalar arguments are (1 - 0.999f in f32 is 1.3e-5 off).
template <typename T>
struct AdamStep {
  T beta1, beta2, omb1, omb2, l2, decay, step_size, inv_sqrt_bc2, eps;
};

// One pass over n elements. The four arrays are distinct tensors (no aliasing), which
// lets the loop vectorize, sqrt and division included.
template <typename T>
void adam_rows(const AdamStep<T>& k, T* __restrict p, const T* __restrict g, T* __restrict m,
               T* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i] + k.l2 * p[i];
    const T mi = k.beta1 * m[i] + k.omb1 * gi;
    const T vi = k.beta2 * v[i] + k.omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * k.decay - k.step_size * mi / (std::sqrt(vi) * k.inv_sqrt_bc2 + k.eps);
  }
}

}  // namespace

void adam_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                 const std::vector<Tensor>& m, const std::vector<Tensor>& v,
                 const std::vector<Tensor>& low, double beta1, double beta2, double l2,
                 double decay, double step_size, double inv_sqrt_bc2, double eps,
                 const Tensor& constants) {
  if (p.empty()) return;
  detail::check_optimizer_lists("adam_update", p, {&g, &m, &v}, low);
  if (const auto k = detail::check_step_constants("adam_update", constants, 4, p[0].device());
      !k.empty()) {
    l2 = k[0];
    decay = k[1];
    step_size = k[2];
    inv_sqrt_bc2 = k[3];
  }
  auto run = [&]<typename T>() {
    const AdamStep<T> k{
        static_cast<T>(beta1),       static_cast<T>(beta2),        static_cast<T>(1.0 - beta1),
        static_cast<T>(1.0 - beta2), static_cast<T>(l2),           static_cast<T>(decay),
        static_cast<T>(step_size),   static_cast<T>(inv_sqrt_bc2), static_cast<T>(eps)};
    for (size_t i = 0; i < p.size(); ++i) {
      T* pp = p[i].data<T>();
      const T* gp = g[i].data<T>();
      T* mp = m[i].data<T>();
      T* vp = v[i].data<T>();
      const Tensor* lo = !low.empty() && low[i].defined() ? &low[i] : nullptr;
      parallel_for(p[i].numel(), 1 << 13, [&](int64_t b, int64_t e) {
        adam_rows(k, pp + b, gp + b, mp + b, vp + b, e - b);
        if (lo) write_low(*lo, pp, b, e);
      });
    }
  };
  if (p[0].dtype() == DType::f32)
    run.template operator()<float>();
  else
    run.template operator()<double>();
}

void sgd_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                const std::vector<Tensor>& buf, const std::vector<Tensor>& low, double lr,
                double momentum, double dampening, double weight_decay, bool nesterov, bool first,
                const Tensor& constants) {
  if (p.empty()) return;
  detail::check_sgd_lists(p, g, buf, low);
  if (const auto k = detail::check_step_constants("sgd_update", constants, 2, p[0].device());
      !k.empty()) {
    lr = k[0];
    first = k[1] != 0;
  }
  auto run = [&]<typename T>() {
    const T wd = static_cast<T>(weight_decay), mom = static_cast<T>(momentum),
            omd = static_cast<T>(1 - dampening), rate = static_cast<T>(lr);
    for (size_t i = 0; i < p.size(); ++i) {
      T* pp = p[i].data<T>();
      const T* gp = g[i].data<T>();
      T* bp = buf.empty() ? nullptr : buf[i].data<T>();
      const Tensor* lo = !low.empty() && low[i].defined() ? &low[i] : nullptr;
      parallel_for(p[i].numel(), 1 << 14, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) {
          T d = gp[j] + wd * pp[j];
          if (bp) {
            bp[j] = first ? d : mom * bp[j] + omd * d;
            d = nesterov ? d + mom * bp[j] : bp[j];
          }
          pp[j] -= rate * d;
        }
        if (lo) write_low(*lo, pp, b, e);
      });
    }
  };
  if (p[0].dtype() == DType::f32)
    run.template operator()<float>();
  else
    run.template operator()<double>();
}

}  // namespace zt::cpu
