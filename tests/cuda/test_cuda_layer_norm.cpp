// The fused LayerNorm kernels on the GPU against their CPU twins (core/cpu/layer_norm.cpp):
// output and the input, weight and bias gradients of the public op, forward and backward
// on both devices with the same inputs and upstream gradient; and two GPU runs giving the
// same bits (the parameter gradients are reduced in fixed blocks of rows, no atomics), also
// over more blocks of rows than one grid dimension holds.
// Tolerances (|gpu - cpu| <= atol + rtol |cpu|):
//   f32: rtol 1e-4, atol 1e-4 (the GPU sums the statistics in f32 in two passes, the CPU
//        in double in one shifted pass; dweight/dbias are sums in double on both);
//   bf16: rtol 1e-2, atol 2e-2 (f32 arithmetic on both sides, then one bf16 rounding,
//        which may land one bf16 ulp = 2^-8 apart; atol for entries near zero);
//   f16: the same bounds (its ulp, 2^-11 relative, is smaller).
// Without a GPU every test skips and says why.
#include <string>

#include "cuda/cuda_compare.h"

using namespace zt;
using namespace zt::cuda_test;

namespace {

struct Case {
  int64_t rows, D;
  bool affine;
};

// Rows of a GPT-2-small width, D not a multiple of a warp, one row, many blocks of rows
// (and more columns than one block has threads), a row longer than 8 per thread. The warp
// path (rows of whole 16-byte chunks, at most 4 a lane: the forward and dx) takes 64 x 768
// and 300 x 1000 in bf16 (3 and 4 chunks a lane), 9 x 100 in f32 (25 chunks: lanes without
// one), 130 x 512 in f32, 70 x 256 in bf16 without weights and 3 x 64 (fewer rows than a
// block has warps); the block path the others (f32 rows of 768 and 1000 are too long for
// a warp's registers). The parameter gradients load 16 bytes at a time for every D that
// is whole chunks (768, 1000, 4096, 512, 64; 300 rows end in a partial block of 64).
const Case kCases[] = {{64, 768, true},   {3, 37, true},    {1, 19, false},
                       {300, 1000, true}, {5, 4096, true},  {9, 100, false},
                       {130, 512, true},  {70, 256, false}, {3, 64, true}};

Fn layer_norm_fn(int64_t D, bool affine) {
  return [D, affine](const std::vector<Tensor>& in) {
    return affine ? layer_norm(in[0], {D}, in[1], in[2])
                  : layer_norm(in[0], {D}, Tensor(), Tensor());
  };
}

std::vector<Tensor> inputs(const Case& c, DType dt, uint64_t seed) {
  Tensor x = add(normal_cpu({c.rows, c.D}, seed), 0.5).to(dt);
  if (!c.affine) return {x};
  return {x, add(normal_cpu({c.D}, seed + 1), 1.0).to(dt), normal_cpu({c.D}, seed + 2, dt)};
}

}  // namespace

TEST(CudaLayerNorm, MatchesCpuF32Bf16AndF16) {
  ZT_SKIP_WITHOUT_GPU();
  uint64_t seed = 700;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const double rtol = dt == DType::f32 ? 1e-4 : 1e-2, atol = dt == DType::f32 ? 1e-4 : 2e-2;
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " rows " + std::to_string(c.rows) + " D " +
                   std::to_string(c.D) + (c.affine ? " affine" : ""));
      const std::vector<Tensor> in = inputs(c, dt, seed);
      seed += 3;
      const Fn fn = layer_norm_fn(c.D, c.affine);
      EXPECT_TRUE(runs_match(run_on(kGpu, fn, in), run_on(kCpu, fn, in), rtol, atol));
    }
  }
}

// Rows that start off the 16-byte grid (x one element into its storage) take the block
// path, whatever their width, with the same results.
TEST(CudaLayerNorm, RowsOffThe16ByteGridTakeTheBlockPath) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t rows = 64, D = 768;
  std::vector<Tensor> in = inputs({rows, D, true}, DType::bf16, 900);
  in[0] = cat({normal_cpu({1}, 903, DType::bf16), in[0].reshape({-1})}, 0);
  const Fn fn = [](const std::vector<Tensor>& v) {
    return layer_norm(v[0].narrow(0, 1, rows * D).view({rows, D}), {D}, v[1], v[2]);
  };
  EXPECT_TRUE(runs_match(run_on(kGpu, fn, in), run_on(kCpu, fn, in), 1e-2, 2e-2));
}

TEST(CudaLayerNorm, RunsAreBitwiseReproducible) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Case c{300, 1000, true};
    const std::vector<Tensor> in = inputs(c, dt, 800);
    const Fn fn = layer_norm_fn(c.D, c.affine);
    EXPECT_TRUE(runs_match(run_on(kGpu, fn, in), run_on(kGpu, fn, in), 0, 0));
  }
}

// More blocks of 64 rows than a grid's y dimension holds (65535): the parameter
// gradients' row blocks stride over the grid, and sum in double as the CPU's do. Each row
// is (-1, 0, 1) or (-1, 0, 0.5, 1) plus a little noise: among 4M rows of 3 normal values
// some have almost no variance, and their input gradient (a small difference times a huge
// 1/std) would differ by more than f32 rounding between any two summation orders.
TEST(CudaLayerNorm, ParameterGradientsOverMoreRowBlocksThanTheGridHolds) {
  ZT_SKIP_WITHOUT_GPU();
  // D = 3: element by element; D = 4 (one 16-byte chunk of f32): 16 bytes a load.
  for (const std::vector<double>& row : {std::vector<double>{-1, 0, 1}, {-1, 0, 0.5, 1}}) {
    const Case c{65535 * 64 + 100, static_cast<int64_t>(row.size()), true};
    SCOPED_TRACE("D " + std::to_string(c.D));
    std::vector<Tensor> in = inputs(c, DType::f32, 900);
    in[0] = add(mul(normal_cpu({c.rows, c.D}, 901), 0.1), from_vector(row, {c.D}));
    const Fn fn = layer_norm_fn(c.D, c.affine);
    EXPECT_TRUE(runs_match(run_on(kGpu, fn, in), run_on(kCpu, fn, in), 1e-4, 1e-4));
  }
}
