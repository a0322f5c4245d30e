// CPU sum of squares in double (the gradient norm's reduction): one sequential pass with
// eight independent lanes, the specification of the CUDA kernel of the same name.
#include "core/kernels.h"

namespace zt::cpu {

void sum_squares(const Tensor& out, const Tensor& x) {
  ZT_CHECK(x.is_contiguous(), "sum_squares: expects a contiguous input, got ", x.str());
  ZT_CHECK(out.numel() == 1 && out.dtype() == DType::f64,
           "sum_squares: expects a one-element f64 output, got ", out.str());
  out.data<double>()[0] = dispatch_floating(x.dtype(), "sum_squares", [&]<typename T>() {
    // Eight independent partial sums: one running sum is a dependency chain of
    // floating-point adds (about 4 cycles an element); lanes let it vectorize.
    const T* p = x.data<T>();
    const int64_t n = x.numel();
    double lane[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int k = 0; k < 8; ++k) {
        const double v = static_cast<double>(static_cast<acc_t<T>>(p[i + k]));
        lane[k] += v * v;
      }
    for (; i < n; ++i) {
      const double v = static_cast<double>(static_cast<acc_t<T>>(p[i]));
      lane[0] += v * v;
    }
    double s = 0.0;
    for (double l : lane) s += l;
    return s;
  });
}

}  // namespace zt::cpu
