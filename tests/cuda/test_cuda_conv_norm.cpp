// Convolutions (cuDNN; grouped, dilated and transposed too), normalizations, softmax and
// cross-entropy on the GPU against their CPU twins (core/cpu/conv.cpp and core/cpu/norm.cpp
// are the specification).
// Every case runs the public op forward and backward on both devices with the same
// inputs and the same upstream gradient and compares the output and every input
// gradient. Tolerances (|gpu - cpu| <= atol + rtol |cpu|):
//   f32 conv: rtol 1e-4, atol 1e-4 (exact fp32 FMA math, another summation order);
//   f64: 1e-10; bf16/f16 conv: rtol 3e-2, atol 5e-2 against the CPU in f32 on the same
//   rounded inputs (one 16-bit rounding of outputs and gradients);
//   f32 norms / softmax / loss: rtol 1e-4, atol 1e-5 (double sums on both sides; the
//   GPU's expf may differ from glibc's by an ulp).
// Without a GPU every test skips and says why.
//
// To add a case: write the op as a lambda over its inputs, build the inputs on the CPU,
// and compare run_on(kGpu, ...) with run_on(kCpu, ...) at a stated tolerance.
#include <cmath>

#include "core/algo_policy.h"
#include "cuda/cuda_compare.h"

using namespace zt;
using namespace zt::cuda_test;

namespace {

struct Conv2dCase {
  Shape x, w;
  std::array<int64_t, 2> stride;
  std::array<int64_t, 4> pad;  // top, bottom, left, right
  bool bias;
  std::array<int64_t, 2> dilation;
  int64_t groups;
};

struct Conv3dCase {
  Shape x, w;
  std::array<int64_t, 3> stride;
  std::array<int64_t, 6> pad;  // front, back, top, bottom, left, right
  bool bias;
  std::array<int64_t, 3> dilation;
  int64_t groups;
};

const Conv2dCase kConv2d[] = {
    {{2, 3, 9, 11}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, true, {1, 1}, 1},   // 'same' 3x3
    {{2, 4, 10, 9}, {5, 4, 3, 3}, {2, 2}, {0, 1, 0, 1}, true, {1, 1}, 1},   // VQGAN downsample
    {{3, 6, 5, 7}, {2, 6, 1, 1}, {1, 1}, {0, 0, 0, 0}, true, {1, 1}, 1},    // pointwise
    {{1, 5, 8, 8}, {6, 5, 4, 4}, {2, 2}, {1, 1, 1, 1}, false, {1, 1}, 1},   // 4x4 stride 2
    {{2, 3, 9, 10}, {3, 3, 3, 2}, {2, 3}, {1, 0, 2, 1}, false, {1, 1}, 1},  // asymmetric per axis
    {{2, 2, 10, 10}, {3, 2, 3, 3}, {3, 3}, {1, 0, 1, 0}, true, {1, 1}, 1},  // stride 3, p1 < p0
    {{2, 4, 9, 8}, {6, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, true, {1, 1}, 2},    // 2 groups
    {{2, 3, 8, 8}, {6, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, true, {1, 1}, 3},    // depthwise x2
    {{2, 3, 11, 9}, {4, 3, 3, 3}, {1, 1}, {2, 2, 2, 2}, false, {2, 2}, 1},  // dilated
    {{1, 4, 9, 10}, {4, 2, 3, 2}, {2, 1}, {2, 1, 0, 3}, true, {2, 3}, 2},   // both, asymmetric
};

// Causal time, downsample, pointwise, depth 1, time stride, and 2 groups with a time
// dilation of 2.
const Conv3dCase kConv3d[] = {
    {{2, 3, 5, 6, 7}, {4, 3, 3, 3, 3}, {1, 1, 1}, {2, 0, 1, 1, 1, 1}, true, {1, 1, 1}, 1},
    {{1, 4, 4, 8, 8}, {4, 4, 3, 3, 3}, {1, 2, 2}, {2, 0, 0, 1, 0, 1}, true, {1, 1, 1}, 1},
    {{2, 3, 3, 4, 5}, {2, 3, 1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, true, {1, 1, 1}, 1},
    {{2, 3, 1, 6, 6}, {4, 3, 1, 3, 3}, {1, 1, 1}, {0, 0, 1, 1, 1, 1}, false, {1, 1, 1}, 1},
    {{1, 2, 6, 5, 5}, {3, 2, 2, 3, 3}, {2, 1, 1}, {0, 0, 1, 1, 1, 1}, true, {1, 1, 1}, 1},
    {{2, 4, 6, 5, 5}, {6, 2, 2, 3, 3}, {1, 1, 1}, {2, 0, 1, 1, 1, 1}, true, {2, 1, 1}, 2},
};

Fn conv2d_fn(const Conv2dCase& c) {
  return [c](const std::vector<Tensor>& in) {
    Conv2dArgs a;
    a.stride = c.stride;
    a.padding = c.pad;
    a.dilation = c.dilation;
    a.groups = c.groups;
    return conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), a);
  };
}

Fn conv3d_fn(const Conv3dCase& c) {
  return [c](const std::vector<Tensor>& in) {
    Conv3dArgs a;
    a.stride = c.stride;
    a.padding = c.pad;
    a.dilation = c.dilation;
    a.groups = c.groups;
    return conv3d(in[0], in[1], c.bias ? in[2] : Tensor(), a);
  };
}

// x, weight, bias (O) of one case, in dt (rounded through bf16 so 16-bit runs and the
// f32 reference read identical values).
std::vector<Tensor> conv_inputs(const Shape& x, const Shape& w, uint64_t seed, DType dt) {
  return {normal_cpu(x, seed, DType::bf16).to(dt), normal_cpu(w, seed + 1, DType::bf16).to(dt),
          normal_cpu({w[0]}, seed + 2, DType::bf16).to(dt)};
}

std::vector<Tensor> to_dtype(const std::vector<Tensor>& ts, DType dt) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.to(dt));
  return out;
}

}  // namespace

TEST(CudaConv, Conv2dMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  uint64_t seed = 10;
  for (const Conv2dCase& c : kConv2d) {
    SCOPED_TRACE("conv2d x " + shape_str(c.x) + " w " + shape_str(c.w));
    for (DType dt : {DType::f32, DType::f64}) {
      std::vector<Tensor> in = conv_inputs(c.x, c.w, seed, dt);
      auto gpu = run_on(kGpu, conv2d_fn(c), in), cpu = run_on(kCpu, conv2d_fn(c), in);
      double tol = dt == DType::f32 ? 1e-4 : 1e-10;
      EXPECT_TRUE(runs_match(gpu, cpu, tol, tol)) << dtype_name(dt);
      EXPECT_EQ(gpu.out.device(), kGpu);
    }
    seed += 3;
  }
}

TEST(CudaConv, Conv3dMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  uint64_t seed = 40;
  for (const Conv3dCase& c : kConv3d) {
    SCOPED_TRACE("conv3d x " + shape_str(c.x) + " w " + shape_str(c.w));
    for (DType dt : {DType::f32, DType::f64}) {
      std::vector<Tensor> in = conv_inputs(c.x, c.w, seed, dt);
      auto gpu = run_on(kGpu, conv3d_fn(c), in), cpu = run_on(kCpu, conv3d_fn(c), in);
      double tol = dt == DType::f32 ? 1e-4 : 1e-10;
      EXPECT_TRUE(runs_match(gpu, cpu, tol, tol)) << dtype_name(dt);
    }
    seed += 3;
  }
}

TEST(CudaConv, TransposedMatchesCpu) {
  // The k4 s2 p1 upsampling, output padding with grouped dilated taps, a 3-D one, and output
  // padding past the stride.
  ZT_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x, w;  // w (C, O/groups, k...)
    std::array<int64_t, 3> stride, padding, output_padding, dilation;
    int64_t groups;
  };
  const Case cases[] = {
      {{2, 4, 5, 6}, {4, 3, 4, 4}, {2, 2, 0}, {1, 1, 0}, {0, 0, 0}, {1, 1, 0}, 1},
      {{2, 4, 3, 4}, {4, 1, 3, 2}, {2, 3, 0}, {1, 0, 0}, {1, 2, 0}, {2, 2, 0}, 2},
      {{1, 2, 3, 4, 4}, {2, 3, 2, 3, 3}, {2, 1, 1}, {1, 1, 1}, {1, 0, 0}, {1, 1, 2}, 1},
      // output_padding at or above the stride, below the dilation (cropped and padded).
      {{2, 4, 3, 4}, {4, 3, 3, 2}, {1, 2, 0}, {2, 0, 0}, {2, 2, 0}, {3, 3, 0}, 1},
  };
  uint64_t seed = 60;
  for (const Case& c : cases) {
    SCOPED_TRACE("conv_transpose x " + shape_str(c.x) + " w " + shape_str(c.w));
    const bool is3d = c.x.size() == 5;
    Fn fn = [c, is3d](const std::vector<Tensor>& in) {
      if (is3d) {
        ConvTranspose3dArgs a{c.stride, c.padding, c.output_padding, c.dilation, c.groups};
        return conv_transpose3d(in[0], in[1], in[2], a);
      }
      ConvTranspose2dArgs a{{c.stride[0], c.stride[1]},
                            {c.padding[0], c.padding[1]},
                            {c.output_padding[0], c.output_padding[1]},
                            {c.dilation[0], c.dilation[1]},
                            c.groups};
      return conv_transpose2d(in[0], in[1], in[2], a);
    };
    for (DType dt : {DType::f32, DType::f64}) {
      std::vector<Tensor> in = {normal_cpu(c.x, seed, DType::bf16).to(dt),
                                normal_cpu(c.w, seed + 1, DType::bf16).to(dt),
                                normal_cpu({c.w[1] * c.groups}, seed + 2, DType::bf16).to(dt)};
      auto gpu = run_on(kGpu, fn, in), cpu = run_on(kCpu, fn, in);
      double tol = dt == DType::f32 ? 1e-4 : 1e-10;
      EXPECT_TRUE(runs_match(gpu, cpu, tol, tol)) << dtype_name(dt);
    }
    seed += 3;
  }
}

TEST(CudaConv, HalfPrecisionMatchesCpuInF32) {
  ZT_SKIP_WITHOUT_GPU();
  // 16-bit inputs, fp32 accumulation in cuDNN; the reference is the CPU in f32 on the
  // same (rounded) values. rtol 3e-2, atol 5e-2: outputs of magnitude ~5 rounded once.
  for (DType dt : {DType::bf16, DType::f16}) {
    for (const Conv2dCase& c : kConv2d) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " conv2d x " + shape_str(c.x));
      std::vector<Tensor> in = conv_inputs(c.x, c.w, 70, dt);
      auto gpu = run_on(kGpu, conv2d_fn(c), in);
      auto cpu = run_on(kCpu, conv2d_fn(c), to_dtype(in, DType::f32));
      EXPECT_EQ(gpu.out.dtype(), dt);
      EXPECT_TRUE(runs_match(gpu, cpu, 3e-2, 5e-2));
    }
    const Conv3dCase& c = kConv3d[0];
    std::vector<Tensor> in = conv_inputs(c.x, c.w, 71, dt);
    auto gpu = run_on(kGpu, conv3d_fn(c), in);
    auto cpu = run_on(kCpu, conv3d_fn(c), to_dtype(in, DType::f32));
    EXPECT_TRUE(runs_match(gpu, cpu, 3e-2, 5e-2)) << dtype_name(dt) << " conv3d";
  }
}

TEST(CudaConv, OnlyRequestedGradientsAndRepeatCallsAgree) {
  ZT_SKIP_WITHOUT_GPU();
  const Conv2dCase& c = kConv2d[0];
  std::vector<Tensor> in = conv_inputs(c.x, c.w, 80, DType::f32);
  // Frozen weight: only the input gradient (the backward-data pass alone).
  Tensor x = in[0].to(kGpu).detach(), w = in[1].to(kGpu), b = in[2].to(kGpu);
  x.set_requires_grad(true);
  Conv2dArgs a;
  a.padding = c.pad;
  Tensor y = conv2d(x, w, b, a);
  sum(y).backward();
  Tensor xr = in[0].detach();
  xr.set_requires_grad(true);
  sum(conv2d(xr, in[1], in[2], a)).backward();
  EXPECT_TRUE(zt::test::all_close(x.grad(), xr.grad(), 1e-4, 1e-4));
  // The algorithm cache: a second identical call gives bitwise the same output.
  EXPECT_TRUE(zt::test::all_close(conv2d(x.detach(), w, b, a), y.detach(), 0, 0));
}

// A convolution of a contiguous view off a 16-byte boundary (some cuDNN engines refuse such
// pointers) gives, forward and backward, the bits of the same values in a fresh tensor.
TEST(CudaConv, ViewsAtAnOddOffsetConvolveAsFreshTensors) {
  ZT_SKIP_WITHOUT_GPU();
  Conv2dArgs a;
  a.padding = {1, 1, 1, 1};
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor big = normal_cpu({5, 3, 5, 5}, 7).to(dt).to(kGpu);
    Tensor view = big.narrow(0, 1, 4).detach();  // 75 elements in: 150 bytes in 16 bits
    ASSERT_TRUE(view.is_contiguous());
    ASSERT_NE(reinterpret_cast<uintptr_t>(view.data_ptr()) % 16, 0u);
    Tensor fresh = view.clone().detach();
    const Tensor w = normal_cpu({8, 3, 3, 3}, 8).to(dt).to(kGpu);
    view.set_requires_grad(true);
    fresh.set_requires_grad(true);
    const Tensor y_view = conv2d(view, w, Tensor(), a), y_fresh = conv2d(fresh, w, Tensor(), a);
    EXPECT_TRUE(zt::test::all_close(y_view, y_fresh, 0, 0));
    sum(y_view).backward();
    sum(y_fresh).backward();
    EXPECT_TRUE(zt::test::all_close(view.grad(), fresh.grad(), 0, 0));
  }
}

// Every cuDNN algorithm policy (core/algo_policy.h: timed candidates, atomics allowed) gives
// the CPU's results at the tolerances above, f32 and bf16, 2-D and 1-D.
TEST(CudaConv, EveryAlgorithmPolicyMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  const ConvAlgoPolicy saved = conv_algo_policy();
  Fn conv1d_fn = [](const std::vector<Tensor>& in) {
    Conv1dArgs a;
    a.stride = {2};
    a.padding = {2, 1};
    return conv1d(in[0], in[1], in[2], a);
  };
  for (ConvAlgoPolicy p :
       {ConvAlgoPolicy{true, true}, ConvAlgoPolicy{true, false}, ConvAlgoPolicy{false, false}}) {
    set_conv_algo_policy(p);
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string("benchmark ") + (p.benchmark ? "on" : "off") + ", deterministic " +
                   (p.deterministic ? "on" : "off") + ", " + dtype_name(dt));
      const double rtol = dt == DType::f32 ? 1e-4 : 3e-2, atol = dt == DType::f32 ? 1e-4 : 5e-2;
      for (const Conv2dCase& c : {kConv2d[0], kConv2d[1], kConv2d[6]}) {
        std::vector<Tensor> in = conv_inputs(c.x, c.w, 90, dt);
        auto gpu = run_on(kGpu, conv2d_fn(c), in);
        auto cpu = run_on(kCpu, conv2d_fn(c), to_dtype(in, DType::f32));
        EXPECT_TRUE(runs_match(gpu, cpu, rtol, atol)) << "conv2d x " << shape_str(c.x);
      }
      std::vector<Tensor> in = conv_inputs({2, 3, 17}, {5, 3, 4}, 91, dt);
      auto gpu = run_on(kGpu, conv1d_fn, in);
      auto cpu = run_on(kCpu, conv1d_fn, to_dtype(in, DType::f32));
      EXPECT_TRUE(runs_match(gpu, cpu, rtol, atol)) << "conv1d";
    }
  }
  set_conv_algo_policy(saved);
}

TEST(CudaNorm, GroupNormMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    int64_t groups;
    bool affine;
    double offset;  // added to x: the shifted statistics must not lose precision
  };
  const Case cases[] = {{{3, 8, 4, 5}, 4, true, 3.0},
                        {{2, 8, 3, 2, 2}, 8, false, 0.0},
                        {{2, 6, 1}, 1, true, 100.0},
                        {{4, 32, 16, 16}, 32, true, -2.0},
                        // a batch over the parameter gradients' 16 lanes, not a multiple
                        {{37, 40, 3, 3}, 4, true, 1.0}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " group_norm " + shape_str(c.x));
      Tensor x = add(normal_cpu(c.x, seed, DType::f64), c.offset).to(dt);
      Tensor w = normal_cpu({c.x[1]}, seed + 1, dt), b = normal_cpu({c.x[1]}, seed + 2, dt);
      int64_t g = c.groups;
      Fn fn = c.affine ? Fn([g](const std::vector<Tensor>& in) {
        return group_norm(in[0], g, in[1], in[2]);
      })
                       : Fn([g](const std::vector<Tensor>& in) {
                           return group_norm(in[0], g, Tensor(), Tensor());
                         });
      auto gpu = run_on(kGpu, fn, {x, w, b}), cpu = run_on(kCpu, fn, {x, w, b});
      double rtol = dt == DType::f64 ? 1e-10 : dt == DType::f32 ? 1e-4 : 2e-2;
      double atol = dt == DType::f64 ? 1e-10 : dt == DType::f32 ? 1e-5 : 2e-2;
      EXPECT_TRUE(runs_match(gpu, cpu, rtol, atol));
    }
    seed += 3;
  }
}

// The epilogue (silu, and n * scale + shift) in the GPU's forward kernel and its backward
// kernel that recomputes n, against the CPU's: the output and the gradients of x, weight,
// bias, scale and shift; with and without affine parameters, silu and modulation; rows
// longer than a warp and blocks longer than a block's threads (S 63, M 504); only the
// modulation wanting gradients (the norm's part skipped); and only the parameters wanting
// them, x not (the gradient of n in a scratch buffer of the backward's, no dx).
TEST(CudaNorm, GroupNormEpilogueMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    int64_t groups;
    bool affine, modulated, silu;
  };
  const Case cases[] = {{{3, 64, 6, 5}, 32, true, false, true},
                        {{3, 64, 6, 5}, 32, true, true, true},
                        {{2, 64, 9, 7}, 8, false, true, false},
                        {{2, 64, 9, 7}, 8, true, true, true}};
  uint64_t seed = 150;
  for (const Case& c : cases) {
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(c.x) +
                   (c.modulated ? " modulated" : "") + (c.silu ? " silu" : "") +
                   (c.affine ? "" : " no affine"));
      Tensor x = add(normal_cpu(c.x, seed, DType::f64), 1.0).to(dt);
      Tensor w = normal_cpu({c.x[1]}, seed + 1, dt), b = normal_cpu({c.x[1]}, seed + 2, dt);
      Tensor s = normal_cpu(c.x, seed + 3, dt), t = normal_cpu(c.x, seed + 4, dt);
      Fn fn = [c](const std::vector<Tensor>& in) {
        const GroupNormEpilogue e{c.modulated ? in[3] : Tensor(), c.modulated ? in[4] : Tensor(),
                                  c.silu};
        return group_norm(in[0], c.groups, c.affine ? in[1] : Tensor(), c.affine ? in[2] : Tensor(),
                          1e-6, e);
      };
      double tol = dt == DType::f64 ? 1e-10 : dt == DType::f32 ? 1e-4 : 3e-2;
      EXPECT_TRUE(runs_match(run_on(kGpu, fn, {x, w, b, s, t}), run_on(kCpu, fn, {x, w, b, s, t}),
                             tol, tol));
      if (c.modulated) {  // only the modulation wants gradients
        Fn only = [fn, x, w, b](const std::vector<Tensor>& in) {
          const Device dev = in[0].device();
          return fn({x.to(dev), w.to(dev), b.to(dev), in[0], in[1]});
        };
        EXPECT_TRUE(runs_match(run_on(kGpu, only, {s, t}), run_on(kCpu, only, {s, t}), tol, tol));
      }
      if (c.affine) {  // weight, bias (and scale, shift) want gradients, x does not
        Fn params = [fn, x](const std::vector<Tensor>& in) {
          return fn({x.to(in[0].device()), in[0], in[1], in[2], in[3]});
        };
        EXPECT_TRUE(runs_match(run_on(kGpu, params, {w, b, s, t}),
                               run_on(kCpu, params, {w, b, s, t}), tol, tol));
      }
      seed += 5;
    }
  }
}

TEST(CudaNorm, BatchNormTrainAndEvalMatchCpu) {
  ZT_SKIP_WITHOUT_GPU();
  const Shape shapes[] = {{4, 6, 3, 5}, {16, 5}, {2, 3, 2, 4, 4}};
  uint64_t seed = 200;
  for (const Shape& s : shapes) {
    for (DType dt : {DType::f32, DType::f64}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " batch_norm " + shape_str(s));
      const int64_t C = s[1];
      Tensor x = add(normal_cpu(s, seed, DType::f64), 5.0).to(dt);
      Tensor w = normal_cpu({C}, seed + 1, dt), b = normal_cpu({C}, seed + 2, dt);
      Tensor rm0 = normal_cpu({C}, seed + 3, dt);
      Tensor rv0 = add(abs(normal_cpu({C}, seed + 4, dt)), 0.5);
      double rtol = dt == DType::f32 ? 1e-4 : 1e-10, atol = dt == DType::f32 ? 1e-5 : 1e-10;
      for (bool training : {true, false}) {
        SCOPED_TRACE(training ? "training" : "eval");
        Tensor rm_c = rm0.clone(), rv_c = rv0.clone();
        Tensor rm_g = rm0.to(kGpu), rv_g = rv0.to(kGpu);
        auto fn_for = [training](const Tensor& rm, const Tensor& rv) {
          return Fn([=](const std::vector<Tensor>& in) {
            return batch_norm(in[0], rm, rv, in[1], in[2], training, 0.1, 1e-5);
          });
        };
        auto gpu = run_on(kGpu, fn_for(rm_g, rv_g), {x, w, b});
        auto cpu = run_on(kCpu, fn_for(rm_c, rv_c), {x, w, b});
        EXPECT_TRUE(runs_match(gpu, cpu, rtol, atol));
        // Running statistics: updated in place on the GPU exactly as on the CPU.
        EXPECT_TRUE(zt::test::all_close(rm_g, rm_c, rtol, atol)) << "running_mean";
        EXPECT_TRUE(zt::test::all_close(rv_g, rv_c, rtol, atol)) << "running_var";
      }
      // Training without running statistics.
      Fn plain = [](const std::vector<Tensor>& in) {
        return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      };
      EXPECT_TRUE(
          runs_match(run_on(kGpu, plain, {x, w, b}), run_on(kCpu, plain, {x, w, b}), rtol, atol));
    }
    seed += 5;
  }
  // Running statistics in bf16 beside an f32 or a bf16 input: the statistics kernel
  // updates them in their own dtype, the update in double rounded to float, then to bf16,
  // as the CPU's (one bf16 step apart at most: the statistics' double sums differ in order).
  for (DType xt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(xt)) + " input, bf16 running statistics");
    const Tensor x = add(normal_cpu({4, 6, 3, 5}, 300, DType::f64), 5.0).to(xt);
    Tensor rm_c = normal_cpu({6}, 301, DType::bf16);
    Tensor rv_c = add(abs(normal_cpu({6}, 302, DType::f32)), 0.5).to(DType::bf16);
    Tensor rm_g = rm_c.to(kGpu), rv_g = rv_c.to(kGpu);
    // The counter, incremented in the statistics' kernel.
    Tensor count = full({}, 6.0, DType::i64, kGpu);
    batch_norm(x.to(kGpu), rm_g, rv_g, Tensor(), Tensor(), true, 0.1, 1e-5, count);
    batch_norm(x, rm_c, rv_c, Tensor(), Tensor(), true, 0.1, 1e-5);
    EXPECT_EQ(count.item(), 7.0);
    EXPECT_EQ(rm_g.dtype(), DType::bf16);
    EXPECT_TRUE(zt::test::all_close(rm_g, rm_c, 8e-3, 8e-3)) << "running_mean";
    EXPECT_TRUE(zt::test::all_close(rv_g, rv_c, 8e-3, 8e-3)) << "running_var";
  }
}

TEST(CudaNorm, LayerNormAndRmsNormMatchCpu) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor x = add(normal_cpu({4, 7, 32}, 300), 1.5);
  Tensor w = normal_cpu({32}, 301), b = normal_cpu({32}, 302);
  Fn ln = [](const std::vector<Tensor>& in) { return layer_norm(in[0], {32}, in[1], in[2]); };
  EXPECT_TRUE(runs_match(run_on(kGpu, ln, {x, w, b}), run_on(kCpu, ln, {x, w, b}), 1e-4, 1e-5));
  Tensor w2 = normal_cpu({7, 32}, 303), b2 = normal_cpu({7, 32}, 304);
  Fn ln2 = [](const std::vector<Tensor>& in) { return layer_norm(in[0], {7, 32}, in[1], in[2]); };
  EXPECT_TRUE(
      runs_match(run_on(kGpu, ln2, {x, w2, b2}), run_on(kCpu, ln2, {x, w2, b2}), 1e-4, 1e-5));
  Fn rms = [](const std::vector<Tensor>& in) { return rms_norm(in[0], {32}, in[1]); };
  EXPECT_TRUE(runs_match(run_on(kGpu, rms, {x, w}), run_on(kCpu, rms, {x, w}), 1e-4, 1e-5));
}

TEST(CudaSoftmax, SoftmaxAndLogSoftmaxMatchCpu) {
  ZT_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    int64_t dim;
  };
  const Case cases[] = {{{5, 37}, -1}, {{3, 9, 4, 5}, 1}, {{2, 5000}, 1}, {{6, 4, 3}, 0}, {{7}, 0}};
  uint64_t seed = 400;
  for (const Case& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (log ? " log_softmax " : " softmax ") +
                     shape_str(c.x) + " dim " + std::to_string(c.dim));
        Tensor x = mul(normal_cpu(c.x, seed, dt), 3.0);
        int64_t d = c.dim;
        Fn fn = [d, log](const std::vector<Tensor>& in) {
          return log ? log_softmax(in[0], d) : softmax(in[0], d);
        };
        double rtol = dt == DType::f32 ? 1e-4 : 1e-10, atol = dt == DType::f32 ? 1e-5 : 1e-10;
        EXPECT_TRUE(runs_match(run_on(kGpu, fn, {x}), run_on(kCpu, fn, {x}), rtol, atol));
      }
    }
    seed += 1;
  }
  // Rows with -inf entries (masked attention): same as the CPU. An all -inf row is NaN on
  // both, as in PyTorch (compared apart: a NaN never counts as close).
  const double inf = INFINITY;
  Tensor m = from_vector({1, -inf, 2, 0, -inf, -inf, -inf, -inf, 3, 3, 3, 3}, {3, 4});
  for (bool log : {false, true}) {
    Tensor ref = log ? log_softmax(m, 1) : softmax(m, 1);
    Tensor got = (log ? log_softmax(m.to(kGpu), 1) : softmax(m.to(kGpu), 1)).to(kCpu);
    const char* what = log ? "log_softmax" : "softmax";
    for (int64_t row : {0, 2})
      EXPECT_TRUE(zt::test::all_close(got.select(0, row), ref.select(0, row), 1e-6, 1e-7))
          << what << " row " << row;
    for (double v : got.select(0, 1).to_vector())
      EXPECT_TRUE(std::isnan(v)) << what << " GPU: " << v;
    for (double v : ref.select(0, 1).to_vector())
      EXPECT_TRUE(std::isnan(v)) << what << " CPU: " << v;
  }
  // bf16 goes through f32 in the op, on both devices.
  Tensor xb = normal_cpu({4, 33}, 450, DType::bf16);
  EXPECT_TRUE(zt::test::all_close(softmax(xb.to(kGpu), 1), softmax(xb, 1), 1e-2, 1e-3));
}

TEST(CudaLoss, CrossEntropyMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  // (N, C) with some ignored targets, i64 and i32; (N, C, H, W) with the class dim inside.
  struct Case {
    Shape logits;
    Shape target;
    DType index_type;
  };
  const Case cases[] = {{{16, 11}, {16}, DType::i64},
                        {{16, 11}, {16}, DType::i32},
                        {{2, 5, 3, 4}, {2, 3, 4}, DType::i64},
                        {{3, 1000}, {3}, DType::i64}};
  uint64_t seed = 500;
  for (const Case& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " cross_entropy " + shape_str(c.logits));
      Tensor logits = mul(normal_cpu(c.logits, seed, dt), 2.0);
      std::vector<double> t =
          zt::cuda_test::ints_cpu(c.target, 0, c.logits[1], seed + 1).to_vector();
      for (size_t i = 0; i < t.size(); i += 5) t[i] = -100;  // ignore_index
      Tensor target = from_vector(t, c.target, c.index_type);
      Fn fn = [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); };
      // f32 logits: exp in f32 and sums in double on both sides (the GPU's expf may
      // differ by an ulp); f64 logits: all in double.
      double tol = dt == DType::f32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(runs_match(run_on(kGpu, fn, {logits, target}), run_on(kCpu, fn, {logits, target}),
                             tol, tol));
    }
    seed += 2;
  }
  // A target out of range is an error naming it, as on the CPU; the GPU raises it at the
  // host's next wait (here: reading the loss).
  Tensor logits = normal_cpu({4, 3}, 510).to(kGpu);
  Tensor bad = from_vector({0, 2, 3, 1}, {4}, DType::i64).to(kGpu);
  EXPECT_THROW((void)cross_entropy(logits, bad).item(), zt::Error);
  // Every target ignored: NaN, as on the CPU.
  Tensor ignored = full({4}, -100, DType::i64, kGpu);
  EXPECT_TRUE(std::isnan(cross_entropy(logits, ignored).item()));
}
