// The fused cross-entropy kernels on the GPU against their CPU twins (core/cpu/softmax.cpp
// is the specification) over a GPT-2-sized vocabulary: loss and logits gradient of the
// public op, forward and backward on both devices with the same inputs and upstream
// gradient. Tolerances (|gpu - cpu| <= atol + rtol |cpu|):
//   f32: rtol 1e-5, atol 1e-12 (both sum exponentials in another order, the CPU in double,
//        the GPU's threads in f32 between the steps of their running max and then in
//        double; the GPU's exponentials of the sum are ex2.approx, about 2 ulp, and its
//        expf may differ from glibc's by an ulp; gradient entries are ~1e-7);
//   bf16: rtol 1e-2, atol 1e-12 (f32 math on both sides, the GPU's gradient exponentials
//        ex2.approx, then one bf16 rounding of the loss and of each gradient entry, which
//        may land one bf16 ulp = 2^-8 apart);
//   f16: rtol 2e-3, atol 2^-24 (as bf16, one f16 ulp = 2^-11 .. 2^-10 relative apart, and
//        gradient entries of ~1e-8 below f16's normal range, where one rounding may land
//        one subnormal step = 2^-24 apart).
// Without a GPU every test skips and says why.
#include <cmath>

#include "cuda/cuda_compare.h"

#ifdef ZT_WITH_CUDA
#include "core/kernels.h"
#endif

using namespace zt;
using namespace zt::cuda_test;

TEST(CudaCrossEntropy, VocabOf50kMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t P = 64, C = 50257;
  struct Case {
    DType dtype;
    DType index_type;
    double rtol, atol;
  };
  const Case cases[] = {{DType::f32, DType::i64, 1e-5, 1e-12},
                        {DType::bf16, DType::i32, 1e-2, 1e-12},
                        {DType::f16, DType::i64, 2e-3, 0x1p-24}};
  uint64_t seed = 600;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " logits, " + dtype_name(c.index_type) +
                 " targets");
    // Logits of scale 3; row 1 has its first 1000 classes masked to -inf. f16: row 2 of
    // scale 6000, logits up to ~2.7e4 (f16's range ends at 65504), its loss term ~3e4.
    std::vector<double> x = mul(normal_cpu({P, C}, seed, DType::f64), 3.0).to_vector();
    for (int64_t k = 0; k < 1000; ++k) x[C + k] = -INFINITY;
    if (c.dtype == DType::f16)
      for (int64_t k = 0; k < C; ++k) x[2 * C + k] *= 2000;
    Tensor logits = from_vector(x, {P, C}, c.dtype);
    std::vector<double> t = zt::cuda_test::ints_cpu({P}, 1000, C, seed + 1).to_vector();
    for (int64_t i = 0; i < P; i += 9) t[i] = -100;  // ignore_index
    Tensor target = from_vector(t, {P}, c.index_type);
    Fn fn = [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); };
    EXPECT_TRUE(runs_match(run_on(kGpu, fn, {logits, target}), run_on(kCpu, fn, {logits, target}),
                           c.rtol, c.atol));
    seed += 2;
  }
}

TEST(CudaCrossEntropy, LossIsReproducible) {
  ZT_SKIP_WITHOUT_GPU();
  // The block trees are fixed: the same inputs give bitwise the same loss and gradient.
  Tensor logits = normal_cpu({32, 50257}, 620, DType::bf16).to(kGpu);
  Tensor target = zt::cuda_test::ints_cpu({32}, 0, 50257, 621).to(kGpu);
  Fn fn = [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); };
  zt::cuda_test::Run a = run_on(kGpu, fn, {logits, target});
  zt::cuda_test::Run b = run_on(kGpu, fn, {logits, target});
  EXPECT_TRUE(runs_match(a, b, 0.0, 0.0));
}

#ifdef ZT_WITH_CUDA
// Rows the CPU twin defines at the edges, over the 50k vocabulary, in f32 and bf16: a +inf
// logit makes the row's log-sum-exp NaN (inf - inf), a NaN logit makes it NaN, a row
// all -inf (its target kept) has -inf; a plain row beside them is unaffected.
TEST(CudaCrossEntropy, EdgeRowsGiveTheCpusLogSumExp) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t P = 4, C = 50257;
  std::vector<double> x = normal_cpu({P, C}, 630, DType::f64).to_vector();
  x[0 * C + 777] = INFINITY;
  x[1 * C + 31] = NAN;
  for (int64_t k = 0; k < C; ++k) x[2 * C + k] = -INFINITY;
  const Tensor target = from_vector({5, 6, 7, 8}, {P}, DType::i64);
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor logits = from_vector(x, {P, C}, dt);
    Tensor lse = Tensor::empty({P}, DType::f64), stats = Tensor::empty({3}, DType::f64);
    cpu::cross_entropy_forward(stats, lse, logits, target, -100);
    Tensor glse = Tensor::empty({P}, DType::f64, kGpu);
    Tensor gstats = Tensor::empty({3}, DType::f64, kGpu);
    cuda::cross_entropy_forward(gstats, glse, logits.to(kGpu), target.to(kGpu), -100);
    const std::vector<double> want = lse.to_vector(), got = glse.to(kCpu).to_vector();
    EXPECT_TRUE(std::isnan(got[0]) && std::isnan(want[0])) << got[0] << " / " << want[0];
    EXPECT_TRUE(std::isnan(got[1]) && std::isnan(want[1])) << got[1] << " / " << want[1];
    EXPECT_TRUE(std::isinf(got[2]) && got[2] < 0 && want[2] == got[2]) << got[2];
    EXPECT_NEAR(got[3], want[3], 1e-5 * std::abs(want[3]));
  }
}
#endif
