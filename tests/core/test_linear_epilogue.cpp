// The GEMM with a fused bias / GELU epilogue (gemm_epilogue) and the ops on it: linear
// (bias epilogue) and linear_gelu (bias + tanh GELU, one autograd node) against the
// composed ops (matmul, bias add, gelu) — forward and x, weight and bias gradients for
// f32, f64 and bf16, with and without bias, odd sizes and 3-D inputs, and the backward
// kernel with its columns split over several threads. f32 and f64 run the same BLAS call,
// GELU formula and backward kernels as the composed ops, so they agree to the last bit;
// bf16 applies GELU to the fp32 accumulator instead of the rounded pre-activation, one
// bf16 rounding (2^-8) apart, compounded by the backward's products.
#include "common/test_util.h"
#include "core/kernels.h"
#include "cuda/cuda_compare.h"

using namespace zt;
using zt::cuda_test::Fn;
using zt::cuda_test::normal_cpu;
using zt::cuda_test::run_on;
using zt::cuda_test::runs_match;

namespace {

double tol_for(DType dt) {
  return dt == DType::bf16 ? 3e-2 : 0.0;
}

}  // namespace

TEST(GemmEpilogue, KernelEqualsGemmBiasThenGelu) {
  // Padded leading dimensions and transposed operands, as linear passes them.
  const int64_t M = 9, N = 13, K = 7;
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (bool with_gelu : {false, true}) {
          for (bool has_bias : {false, true}) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + " ta=" + std::to_string(ta) +
                         " tb=" + std::to_string(tb) + " gelu=" + std::to_string(with_gelu) +
                         " bias=" + std::to_string(has_bias));
            // Storage (rows, cols + 3); the operand is its first cols columns, read
            // transposed when asked.
            Tensor sa = normal_cpu(ta ? Shape{K, M + 3} : Shape{M, K + 3}, 1, dt);
            Tensor sb = normal_cpu(tb ? Shape{N, K + 3} : Shape{K, N + 3}, 2, dt);
            Tensor a = ta ? sa.narrow(1, 0, M).transpose(0, 1) : sa.narrow(1, 0, K);
            Tensor b = tb ? sb.narrow(1, 0, K).transpose(0, 1) : sb.narrow(1, 0, N);
            Tensor bias = has_bias ? normal_cpu({N}, 3, dt) : Tensor();
            Tensor out = Tensor::empty({M, N}, dt), aux;
            if (with_gelu) aux = Tensor::empty({M, N}, dt);
            cpu::gemm_epilogue(ta, tb, M, N, K, a, sa.size(1), b, sb.size(1), bias, with_gelu, out,
                               aux);
            // Reference in f64 from the same operands, rounded the way the kernel rounds.
            Tensor pre = matmul(a.to(DType::f64), b.to(DType::f64));
            if (has_bias) pre = pre + bias.to(DType::f64);
            const double tol = dt == DType::bf16 ? 1e-2 : (dt == DType::f32 ? 1e-5 : 1e-12);
            if (with_gelu) {
              EXPECT_TRUE(test::all_close(aux.to(DType::f64), pre, tol, tol));
              EXPECT_TRUE(test::all_close(out.to(DType::f64), gelu(pre, true), tol, tol));
            } else {
              EXPECT_TRUE(test::all_close(out.to(DType::f64), pre, tol, tol));
            }
          }
        }
      }
    }
  }
}

TEST(GemmEpilogue, BackwardKernelEqualsGeluGradThenColumnSums) {
  // 37 rows: not a multiple of sum_rows' 8 lanes; the sums must still match it exactly.
  const int64_t M = 37, N = 13;
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    for (bool with_gelu : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " gelu=" + std::to_string(with_gelu));
      Tensor dy = normal_cpu({M, N}, 16, dt), aux = normal_cpu({M, N}, 17, dt);
      Tensor dpre = Tensor::empty({M, N}, dt), dbias = Tensor::empty({N}, dt);
      cpu::gemm_epilogue_backward(M, N, dy, aux, with_gelu, dpre, dbias);
      Tensor want = dy;
      if (with_gelu) {
        want = Tensor::empty({M, N}, dt);
        cpu::binary(BinaryOp::kGeluTanhGrad, want, dy, aux);
        EXPECT_TRUE(test::all_close(dpre, want, 0, 0));
      }
      EXPECT_TRUE(test::all_close(dbias, sum(want, {0}), 0, 0));
    }
  }
}

TEST(GemmEpilogue, BackwardKernelOnSeveralThreadsEqualsGeluGradThenColumnSums) {
  // 5 rows of 10000 columns: the columns are cut into blocks of 3276 for three threads,
  // and each block must read the pre-activations of its own columns.
  test::ThreadCount threads(3);
  const int64_t M = 5, N = 10000;
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor dy = normal_cpu({M, N}, 26, dt), aux = normal_cpu({M, N}, 27, dt);
    Tensor dpre = Tensor::empty({M, N}, dt), dbias = Tensor::empty({N}, dt);
    cpu::gemm_epilogue_backward(M, N, dy, aux, true, dpre, dbias);
    Tensor want = Tensor::empty({M, N}, dt);
    cpu::binary(BinaryOp::kGeluTanhGrad, want, dy, aux);
    EXPECT_TRUE(test::all_close(dpre, want, 0, 0));
    EXPECT_TRUE(test::all_close(dbias, sum(want, {0}), 0, 0));
  }
}

TEST(GemmEpilogue, LinearGeluMatchesComposedOps) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    for (bool has_bias : {false, true}) {
      for (const Shape& xs : {Shape{7, 13}, Shape{3, 5, 13}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " bias=" + std::to_string(has_bias) +
                     " x=" + shape_str(xs));
        std::vector<Tensor> in{normal_cpu(xs, 4, dt), normal_cpu({11, 13}, 5, dt)};
        if (has_bias) in.push_back(normal_cpu({11}, 6, dt));
        auto bias_of = [has_bias](const std::vector<Tensor>& v) {
          return has_bias ? v[2] : Tensor();
        };
        Fn fused = [&](const std::vector<Tensor>& v) {
          return linear_gelu(v[0], v[1], bias_of(v));
        };
        Fn composed = [&](const std::vector<Tensor>& v) {
          return gelu(linear(v[0], v[1], bias_of(v)), /*tanh_approx=*/true);
        };
        const double tol = tol_for(dt);
        EXPECT_TRUE(runs_match(run_on(Device::cpu(), fused, in),
                               run_on(Device::cpu(), composed, in), tol, tol));
      }
    }
  }
}

TEST(GemmEpilogue, LinearMatchesMatmulPlusBias) {
  // linear's bias epilogue against the product and a broadcast add, through backward.
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<Tensor> in{normal_cpu({2, 3, 17}, 7, dt), normal_cpu({5, 17}, 8, dt),
                           normal_cpu({5}, 9, dt)};
    Fn fused = [](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); };
    Fn composed = [](const std::vector<Tensor>& v) {
      return matmul(v[0], v[1].transpose(0, 1)) + v[2];
    };
    // bf16: the composed sum rounds the product before adding the bias.
    const double tol = dt == DType::bf16 ? 2e-2 : (dt == DType::f32 ? 1e-5 : 1e-12);
    EXPECT_TRUE(runs_match(run_on(Device::cpu(), fused, in), run_on(Device::cpu(), composed, in),
                           tol, tol));
  }
}

TEST(GemmEpilogue, LinearGeluGradCheck) {
  std::vector<Tensor> in{test::rand_leaf({2, 3, 4}, 10), test::rand_leaf({5, 4}, 11),
                         test::rand_leaf({5}, 12)};
  EXPECT_GRAD_OK([](const std::vector<Tensor>& v) { return linear_gelu(v[0], v[1], v[2]); }, in);
}

TEST(GemmEpilogue, LinearGeluErrorsNameTheOp) {
  Tensor b = normal_cpu({4}, 13);
  Tensor w2 = normal_cpu({4, 6}, 14);
  EXPECT_TRUE(test::throws_with(
      [&] {
        linear_gelu(normal_cpu({3, 5}, 15), w2);
      },
      "linear_gelu: input [3, 5] does not end in in_features = 6"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        linear_gelu(normal_cpu({3, 6}, 15), w2, b.narrow(0, 0, 3));
      },
      "linear_gelu: bias [3] must be (4)"));
  EXPECT_TRUE(test::throws_with(
      [] {
        linear_gelu(Tensor::empty({3, 0}), Tensor::empty({4, 0}));
      },
      "linear_gelu: weight [4, 0] has no input features"));
}
