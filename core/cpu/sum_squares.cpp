// CPU sum of squares in double (the gradient norm's reduction): one sequential pass in
// norm_sums.h's kLanes independent lanes (the f32 loop compiled for this CPU's widest
// ISA), the specification of the CUDA kernel of the same name.
#include "core/kernels.h"

#include "core/cpu/norm_sums.h"

namespace zt::cpu {

void sum_squares(const Tensor& out, const Tensor& x) {
  ZT_CHECK(x.is_contiguous(), "sum_squares: expects a contiguous input, got ", x.str());
  ZT_CHECK(out.numel() == 1 && out.dtype() == DType::f64,
           "sum_squares: expects a one-element f64 output, got ", out.str());
  out.data<double>()[0] = dispatch_floating(x.dtype(), "sum_squares", [&]<typename T>() {
    double sum = 0.0, sum_sq = 0.0;  // the moments about 0: sum_sq is the sum of squares
    shifted_moments(x.data<T>(), x.numel(), sum, sum_sq, 0.0);
    return sum_sq;
  });
}

}  // namespace zt::cpu
