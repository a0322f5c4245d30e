// Every CUDA kernel against its CPU twin (core/cpu/elementwise.cpp is the
// specification): unary and binary ops on broadcast and non-contiguous inputs,
// comparisons, where, copies and casts between all dtypes, fill, sums, matmul,
// Philox random fills (the same numbers as the CPU); streams and the caching
// allocator are test_cuda_streams_allocator.cpp's. Without a GPU every test skips and
// says why; the device queries must then answer "none" without crashing.
//
// To add a case: build the inputs on the CPU, run the CPU kernel and the CUDA kernel on
// copies (.to(kGpu)), and compare with all_close at the dtype's tolerance.
#include <algorithm>

#include "common/test_util.h"
#include "core/kernels.h"
#include "core/work_counts.h"
#include "cuda/cuda_compare.h"

#ifdef ZT_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/allocator.h"
#include "core/cuda/gemm.h"
#include "core/cuda/stream.h"
#endif

using namespace zt;
using zt::cuda_test::kGpu;
using zt::cuda_test::no_gpu_reason;
using zt::test::all_close;

TEST(CudaDevice, QueriesAnswerWithoutAGpu) {
  bool available = false;
  int count = -1;
  EXPECT_NO_THROW(available = cuda_available());
  EXPECT_NO_THROW(count = cuda_device_count());
  EXPECT_GE(count, 0);
  EXPECT_EQ(available, count > 0);
  if (!available) {
    // Touching the GPU anyway is an error with a message, not a crash.
    EXPECT_THROW(Tensor::empty({4}, DType::f32, Device::cuda()), zt::Error);
  }
}

#ifndef ZT_WITH_CUDA
// Stands for the CUDA op tests, which a CPU-only build leaves out: always a skip, saying why.
TEST(CudaOps, NeedACudaBuild) {
  ZT_GPU_OR_SKIP(no_gpu_reason() << ": the CUDA op tests are not compiled");
}
#else

namespace {

const DType kFloatTypes[] = {DType::f32, DType::f64, DType::bf16, DType::f16};

// Standard normals, rounded to dt.
Tensor randn_cpu(const Shape& s, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  return randn(s, g, DType::f64).to(dt);
}

// Uniform in [0.1, 3.1), rounded to dt: for log, sqrt, rsqrt and fractional powers.
Tensor positive_cpu(const Shape& s, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  Tensor t = Tensor::empty(s, DType::f64);
  uniform_(t, 0.1, 3.1, g);
  return t.to(dt);
}

// Small multiples of 0.5 in [-2, 2], so comparisons see ties.
Tensor ties_cpu(const Shape& s, uint64_t seed, DType dt) {
  Generator g(seed);
  Tensor t = Tensor::empty(s, DType::f64);
  uniform_(t, 0.0, 9.0, g);
  std::vector<double> v = t.to_vector();
  for (double& x : v) x = std::floor(x) * 0.5 - 2.0;
  return from_vector(v, s, dt);
}

double rtol_for(DType dt) {
  switch (dt) {
    case DType::f64:
      return 1e-12;
    case DType::f32:
      return 2e-6;
    default:
      return 1e-2;  // 16-bit: a float-rounding difference can flip the last bit
  }
}

// A non-contiguous (cols, rows) view of a (rows, cols) tensor.
Tensor transposed(const Tensor& t) {
  return t.transpose(0, 1);
}

}  // namespace

TEST(CudaOps, UnaryMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  struct Case {
    UnaryOp op;
    double p0, p1;
    bool positive;
  };
  const Case cases[] = {
      {UnaryOp::kNeg, 0, 0, false},        {UnaryOp::kExp, 0, 0, false},
      {UnaryOp::kLog, 0, 0, true},         {UnaryOp::kSqrt, 0, 0, true},
      {UnaryOp::kRsqrt, 0, 0, true},       {UnaryOp::kAbs, 0, 0, false},
      {UnaryOp::kRelu, 0, 0, false},       {UnaryOp::kSilu, 0, 0, false},
      {UnaryOp::kSigmoid, 0, 0, false},    {UnaryOp::kTanh, 0, 0, false},
      {UnaryOp::kGelu, 0, 0, false},       {UnaryOp::kGeluTanh, 0, 0, false},
      {UnaryOp::kPow, 2, 0, false},        {UnaryOp::kPow, 2.5, 0, true},
      {UnaryOp::kClamp, -0.5, 0.7, false}, {UnaryOp::kAffine, 1.5, -0.25, false},
      {UnaryOp::kSign, 0, 0, false},
  };
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " unary op " +
                   std::to_string(static_cast<int>(c.op)));
      Tensor base = c.positive ? positive_cpu({17, 33}, 1, dt) : randn_cpu({17, 33}, 1, dt);
      Tensor in = transposed(base);  // (33, 17), strided
      Tensor ref = Tensor::empty(in.sizes(), dt);
      cpu::unary(c.op, ref, in, c.p0, c.p1);
      Tensor in_gpu = transposed(base.to(kGpu));
      Tensor out = Tensor::empty(in.sizes(), dt, kGpu);
      cuda::unary(c.op, out, in_gpu, c.p0, c.p1);
      EXPECT_TRUE(all_close(out, ref, rtol_for(dt), 1e-6));
    }
  }
}

TEST(CudaOps, BinaryBroadcastAndStridedMatchCpu) {
  ZT_SKIP_WITHOUT_GPU();
  const BinaryOp ops[] = {BinaryOp::kAdd,         BinaryOp::kSub,      BinaryOp::kMul,
                          BinaryOp::kDiv,         BinaryOp::kReluGrad, BinaryOp::kSiluGrad,
                          BinaryOp::kSigmoidGrad, BinaryOp::kTanhGrad, BinaryOp::kGeluGrad,
                          BinaryOp::kGeluTanhGrad};
  const Shape s = {4, 3, 5};
  for (DType dt : kFloatTypes) {
    Tensor a_base = randn_cpu({4, 1, 5}, 2, dt);  // broadcast along dim 1
    Tensor b_base = randn_cpu({5, 3, 4}, 3, dt);  // permuted: every stride differs
    Tensor a = a_base.expand(s), b = b_base.permute({2, 1, 0});
    Tensor ga = a_base.to(kGpu).expand(s), gb = b_base.to(kGpu).permute({2, 1, 0});
    for (BinaryOp op : ops) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " binary op " +
                   std::to_string(static_cast<int>(op)));
      Tensor ref = Tensor::empty(s, dt);
      cpu::binary(op, ref, a, b);
      Tensor out = Tensor::empty(s, dt, kGpu);
      cuda::binary(op, out, ga, gb);
      EXPECT_TRUE(all_close(out, ref, rtol_for(dt), 1e-5));
    }
  }
  // The public ops route through the same kernels.
  Tensor x = randn_cpu({6, 7}, 4), y = randn_cpu({7}, 5);
  EXPECT_TRUE(all_close(mul(add(x.to(kGpu), y.to(kGpu)), x.to(kGpu)), mul(add(x, y), x)));
}

TEST(CudaOps, ComparisonsMatchCpu) {
  ZT_SKIP_WITHOUT_GPU();
  const BinaryOp ops[] = {BinaryOp::kEq, BinaryOp::kNe, BinaryOp::kLt,
                          BinaryOp::kLe, BinaryOp::kGt, BinaryOp::kGe};
  for (DType dt : {DType::f32, DType::bf16, DType::f64, DType::i64, DType::i32}) {
    Tensor a = ties_cpu({8, 9}, 6, dt), b_row = ties_cpu({9}, 7, dt);
    Tensor b = b_row.expand({8, 9});
    Tensor ga = transposed(transposed(a).contiguous().to(kGpu));  // strided, equal to a
    Tensor gb = b_row.to(kGpu).expand({8, 9});
    for (BinaryOp op : ops) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " compare " +
                   std::to_string(static_cast<int>(op)));
      Tensor ref = Tensor::empty({8, 9}, DType::b8);
      cpu::binary(op, ref, a, b);
      Tensor out = Tensor::empty({8, 9}, DType::b8, kGpu);
      cuda::binary(op, out, ga, gb);
      EXPECT_TRUE(all_close(out, ref, 0, 0));
    }
  }
}

TEST(CudaOps, WhereAndAxpyMatchCpu) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor x = randn_cpu({5, 6}, 8), y = randn_cpu({6}, 9);
  Tensor cond = gt(x, 0.0);
  for (DType dt : {DType::f32, DType::bf16, DType::i64}) {
    Tensor a = randn_cpu({5, 6}, 10).to(dt), b = y.to(dt);
    Tensor ref = where(cond, a, b);
    Tensor got = where(cond.to(kGpu), a.to(kGpu), b.to(kGpu));
    EXPECT_TRUE(all_close(got, ref, 0, 0)) << dtype_name(dt);
  }
  for (DType dt : kFloatTypes) {
    Tensor a = randn_cpu({5, 6}, 11, dt), b = randn_cpu({6}, 12, dt);
    Tensor ref = a.clone(), got = a.to(kGpu);
    add_(ref, b, -0.75);  // in place: out aliases a, b broadcast
    add_(got, b.to(kGpu), -0.75);
    EXPECT_TRUE(all_close(got, ref, rtol_for(dt), 1e-6)) << dtype_name(dt);
  }
}

// addcmul: the vectorized path (contiguous, aligned, one shape) and the general one
// (broadcast and transposed operands), against the CPU's.
TEST(CudaOps, AddcmulMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = randn_cpu({37, 40}, 21, dt), b = randn_cpu({37, 40}, 22, dt);
    const Tensor c = randn_cpu({40, 37}, 23, dt).transpose(0, 1), d = randn_cpu({40}, 24, dt);
    EXPECT_TRUE(all_close(addcmul(a.to(kGpu), b.to(kGpu), b.to(kGpu), 0.5), addcmul(a, b, b, 0.5),
                          rtol_for(dt), 1e-6));
    EXPECT_TRUE(all_close(addcmul(d.to(kGpu), c.to(kGpu), a.to(kGpu)), addcmul(d, c, a),
                          rtol_for(dt), 1e-6));
  }
}

// Unary, binary and axpy over contiguous, 16-byte aligned operands of one shape run 16
// bytes a thread (vec_kernel): lengths below, at and past whole chunks, in place (out is
// an input), and a view one element into its buffer (not aligned: the general path).
TEST(CudaOps, ContiguousOperandsOfOneShapeMatchCpuWholeChunksOrNot) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt : kFloatTypes) {
    for (int64_t n : {1, 7, 8, 9, 1000, 4099}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      const Tensor a = randn_cpu({n + 1}, 13, dt), b = randn_cpu({n + 1}, 14, dt);
      for (int64_t start : {0, 1}) {  // 1: misaligned views
        const Tensor ca = a.narrow(0, start, n), cb = b.narrow(0, start, n);
        const Tensor ga = a.to(kGpu).narrow(0, start, n), gb = b.to(kGpu).narrow(0, start, n);
        for (UnaryOp op : {UnaryOp::kSilu, UnaryOp::kExp, UnaryOp::kAffine}) {
          Tensor ref = Tensor::empty({n}, dt), out = Tensor::empty({n}, dt, kGpu);
          cpu::unary(op, ref, ca, 1.5, -0.25);
          cuda::unary(op, out, ga, 1.5, -0.25);
          EXPECT_TRUE(all_close(out, ref, rtol_for(dt), 1e-6)) << static_cast<int>(op);
        }
        for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kMul, BinaryOp::kSiluGrad}) {
          Tensor ref = Tensor::empty({n}, dt), out = Tensor::empty({n}, dt, kGpu);
          cpu::binary(op, ref, ca, cb);
          cuda::binary(op, out, ga, gb);
          EXPECT_TRUE(all_close(out, ref, rtol_for(dt), 1e-5)) << static_cast<int>(op);
        }
        Tensor ref = ca.clone(), got = ga.clone();
        add_(ref, cb, -0.75);  // in place: out aliases the first operand
        add_(got, gb, -0.75);
        EXPECT_TRUE(all_close(got, ref, rtol_for(dt), 1e-6));
      }
    }
  }
}

// An op whose operands lie on two devices is refused with an error before any kernel
// runs (a CPU kernel given a GPU pointer would read device memory on the host).
TEST(CudaOps, OperandsOnTwoDevicesAreRefused) {
  ZT_SKIP_WITHOUT_GPU();
  const Tensor c = randn_cpu({4, 4}, 13), g = c.to(kGpu);
  const Tensor cond_c = gt(c, 0.0), cond_g = cond_c.to(kGpu);
  EXPECT_THROW(add(c, g), zt::Error);
  EXPECT_THROW(mul(g, c), zt::Error);
  EXPECT_THROW(matmul(c, g), zt::Error);
  EXPECT_THROW(where(cond_c, g, g), zt::Error);
  EXPECT_THROW(where(cond_g, c, c), zt::Error);
  EXPECT_TRUE(all_close(where(cond_g, g, g), c, 0, 0));  // one device: fine
}

TEST(CudaOps, CopyCastsBetweenAllDtypes) {
  ZT_SKIP_WITHOUT_GPU();
  const DType all[] = {DType::f32, DType::f64, DType::bf16, DType::f16,
                       DType::i64, DType::i32, DType::b8};
  std::vector<double> v;
  for (int i = 0; i < 6 * 7; ++i) v.push_back((i - 20) * 0.37);
  Tensor src64 = from_vector(v, {6, 7}, DType::f64);
  for (DType from : all) {
    Tensor src = src64.to(from);
    Tensor gsrc = src.to(kGpu);
    for (DType to : all) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      // Strided source into a contiguous destination.
      Tensor ref = Tensor::empty({7, 6}, to);
      cpu::copy(ref, transposed(src));
      Tensor out = Tensor::empty({7, 6}, to, kGpu);
      cuda::copy(out, transposed(gsrc));
      EXPECT_TRUE(all_close(out, ref, 0, 0));
      // Contiguous source into a strided destination.
      Tensor ref2 = Tensor::empty({7, 6}, to);
      cpu::copy(transposed(ref2), src);
      Tensor out2 = Tensor::empty({7, 6}, to, kGpu);
      cuda::copy(transposed(out2), gsrc);
      EXPECT_TRUE(all_close(out2, ref2, 0, 0));
    }
  }
  // Host <-> device round trips of strided views keep their values.
  Tensor t = randn_cpu({9, 4}, 13);
  EXPECT_TRUE(all_close(transposed(t).to(kGpu).to(Device::cpu()), transposed(t), 0, 0));
  Tensor back = Tensor::empty({4, 9});
  back.copy_(transposed(t.to(kGpu)));
  EXPECT_TRUE(all_close(back, transposed(t), 0, 0));
}

// multi_copy: more pairs than one launch takes (its kernel arguments hold 96), pairs that
// span many blocks, and empty ones; copies and additions equal the CPU's bits, in as
// many launches as the argument blocks need; integers copy too.
TEST(CudaOps, MultiCopyMatchesCpuAcrossLaunches) {
  ZT_SKIP_WITHOUT_GPU();
  std::vector<int64_t> sizes;
  for (int i = 0; i < 200; ++i) sizes.push_back(i % 7 == 0 ? 0 : (i * 977) % 5000 + 1);
  sizes[3] = 300'001;  // 74 blocks of 4096
  for (DType to : {DType::f32, DType::bf16})
    for (DType from : {DType::f32, DType::bf16, DType::f16}) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      std::vector<Tensor> src, dst, gsrc, gcopy, gadd;
      for (size_t i = 0; i < sizes.size(); ++i) {
        src.push_back(randn_cpu({sizes[i]}, 40 + 2 * i, from));
        dst.push_back(randn_cpu({sizes[i]}, 41 + 2 * i, to));
        gsrc.push_back(src.back().to(kGpu));
        gcopy.push_back(dst.back().to(kGpu));
        gadd.push_back(dst.back().to(kGpu));
      }
      std::vector<Tensor> added;
      for (const Tensor& d : dst) added.push_back(d.clone());
      multi_add_(added, src);
      multi_copy_(dst, src);
      const WorkCounts before = work_counts();
      multi_copy_(gcopy, gsrc);
      EXPECT_EQ((work_counts() - before).launches, 2) << "200 pairs, 96 to a launch";
      multi_add_(gadd, gsrc);
      for (size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_TRUE(all_close(gcopy[i], dst[i], 0, 0)) << "pair " << i;
        EXPECT_TRUE(all_close(gadd[i], added[i], 0, 0)) << "pair " << i;
      }
    }
  // Arrays one element past a 16-byte boundary (views into a buffer) take the kernel's
  // element-by-element path, aligned ones its 16-byte one: the same bits either way.
  for (int64_t off : {0, 1}) {
    SCOPED_TRACE("offset " + std::to_string(off));
    Tensor src = randn_cpu({1001}, 90, DType::bf16), dst = randn_cpu({1001}, 91);
    std::vector<Tensor> copied{dst.narrow(0, off, 1000).clone()}, added{copied[0].clone()};
    multi_copy_(copied, {src.narrow(0, off, 1000)});
    multi_add_(added, {src.narrow(0, off, 1000)});
    Tensor gsrc = src.to(kGpu), gcopy = dst.to(kGpu), gadd = dst.to(kGpu);
    multi_copy_({gcopy.narrow(0, off, 1000)}, {gsrc.narrow(0, off, 1000)});
    multi_add_({gadd.narrow(0, off, 1000)}, {gsrc.narrow(0, off, 1000)});
    EXPECT_TRUE(all_close(gcopy.narrow(0, off, 1000), copied[0], 0, 0));
    EXPECT_TRUE(all_close(gadd.narrow(0, off, 1000), added[0], 0, 0));
  }
  // Integers copy into their own dtype (the engine's packed batch counters).
  Tensor counts = from_vector({3, 1, 4, 1, 5}, {5}, DType::i64);
  Tensor out = zeros({5}, DType::i64, kGpu);
  multi_copy_({out.narrow(0, 0, 2), out.narrow(0, 2, 3)},
              {counts.narrow(0, 0, 2).to(kGpu), counts.narrow(0, 2, 3).to(kGpu)});
  EXPECT_TRUE(all_close(out, counts, 0, 0));
}

TEST(CudaOps, FillMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt :
       {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i64, DType::i32, DType::b8}) {
    for (double value : {0.0, 2.7, -1.0}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " fill " + std::to_string(value));
      Tensor ref = zeros({6, 8}, dt), got = zeros({6, 8}, dt, kGpu);
      cpu::fill(ref.slice(1, 0, 8, 2), value);  // every other column: strided
      cuda::fill(got.slice(1, 0, 8, 2), value);
      EXPECT_TRUE(all_close(got, ref, 0, 0));
      cpu::fill(ref, value);
      cuda::fill(got, value);
      EXPECT_TRUE(all_close(got, ref, 0, 0));
    }
  }
}

TEST(CudaOps, SumMatchesCpuAndIsDeterministic) {
  ZT_SKIP_WITHOUT_GPU();
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const Case cases[] = {
      {{1000}, {}},         // one row: warp path
      {{7, 3000}, {1}},     // rows longer than a warp's share: one block per row
      {{3, 200000}, {1}},   // several chunks per row, then a second pass
      {{5, 6, 7}, {0, 2}},  // reduced dims permuted innermost
      {{4096, 3}, {0}},     // many short rows
  };
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " sum of " + shape_str(c.shape));
      Tensor x = randn_cpu(c.shape, 14, dt);
      Tensor ref = sum(x, c.dims);
      Tensor gx = x.to(kGpu);
      Tensor got = sum(gx, c.dims);
      EXPECT_TRUE(all_close(got, ref, dt == DType::bf16 ? 1e-2 : 1e-6, 1e-5));
      EXPECT_TRUE(all_close(sum(gx, c.dims), got, 0, 0)) << "not bitwise reproducible";
    }
  }
}

// A row of more than 65535 chunks (the grid's y limit; 4.3e9 elements, 17 GB of f32 ones):
// the chunk blocks loop over the chunks past it, and the sum is exact (double partials).
TEST(CudaOps, ASumOverMoreChunksThanTheGridHoldsIsWhole) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t n = (int64_t{65535} + 2) * 65536;
  const Tensor x = ones({n}, DType::f32, kGpu);
  EXPECT_EQ(sum(x).item(), static_cast<double>(n));
}

TEST(CudaOps, MatmulMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  ASSERT_FALSE(zt::tf32().matmul);  // exact fp32 by default
  // f32 and f64: exact arithmetic, only the summation order differs.
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor a = randn_cpu({64, 96}, 15, dt), b = randn_cpu({80, 96}, 16, dt);
    Tensor ref = matmul(a, transposed(b));  // transposed operand: cuBLAS op T
    Tensor got = matmul(a.to(kGpu), transposed(b.to(kGpu)));
    double tol = dt == DType::f32 ? 1e-4 : 1e-10;
    EXPECT_TRUE(all_close(got, ref, tol, tol)) << dtype_name(dt);
  }
  // Batched, broadcast, with a bias (linear): tolerance 1e-4 for f32.
  Tensor x = randn_cpu({3, 5, 16}, 17), w = randn_cpu({8, 16}, 18), bias = randn_cpu({8}, 19);
  EXPECT_TRUE(
      all_close(linear(x.to(kGpu), w.to(kGpu), bias.to(kGpu)), linear(x, w, bias), 1e-4, 1e-4));
  Tensor p = randn_cpu({2, 3, 5, 16}, 20), q = randn_cpu({16, 7}, 21);
  EXPECT_TRUE(all_close(matmul(p.to(kGpu), q.to(kGpu)), matmul(p, q), 1e-4, 1e-4));
  // bf16: fp32 accumulation on both sides; the result differs by at most a bf16 rounding
  // (2^-8 relative), so rtol 1e-2, atol 1e-2.
  Tensor ab = randn_cpu({48, 64}, 22, DType::bf16), bb = randn_cpu({64, 40}, 23, DType::bf16);
  Tensor ref = matmul(ab, bb), got = matmul(ab.to(kGpu), bb.to(kGpu));
  EXPECT_EQ(got.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(got, ref, 1e-2, 1e-2));
}

TEST(CudaOps, RandomFillEqualsCpu) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt : kFloatTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Generator gc(1234), gg(1234);
    // Two draws each: the second starts at the generator's advanced offset.
    for (int draw = 0; draw < 2; ++draw) {
      Tensor uc = rand({1000}, gc, dt), ug = rand({1000}, gg, dt, kGpu);
      EXPECT_TRUE(all_close(ug, uc, 0, 0)) << "uniform, draw " << draw;
      // Normals use log/cos in double: equal up to the last bit of the math library.
      Tensor nc = randn({1001}, gc, dt), ng = randn({1001}, gg, dt, kGpu);
      EXPECT_TRUE(all_close(ng, nc, dt == DType::f64 ? 1e-12 : rtol_for(dt), 1e-12))
          << "normal, draw " << draw;
    }
    EXPECT_EQ(gc.offset(), gg.offset());
  }
  // Bounds other than [0, 1): a + (b - a) u rounds twice on both devices (a fused
  // multiply-add on the GPU would differ in the last bit of an f64).
  for (DType dt : {DType::f32, DType::f64}) {
    Generator gc(77), gg(77);
    Tensor c = Tensor::empty({4096}, dt), g = Tensor::empty({4096}, dt, kGpu);
    uniform_(c, 0.1, 3.1, gc);
    uniform_(g, 0.1, 3.1, gg);
    EXPECT_TRUE(all_close(g, c, 0, 0)) << "uniform [0.1, 3.1) " << dtype_name(dt);
  }
  // A strided destination is filled in logical order, as on the CPU.
  Generator gc(5), gg(5);
  Tensor c = zeros({6, 4}), g = zeros({6, 4}, DType::f32, kGpu);
  normal_(transposed(c), 1.0, 2.0, gc);
  normal_(transposed(g), 1.0, 2.0, gg);
  EXPECT_TRUE(all_close(g, c, 1e-6, 1e-6));
}

// TF32 (set_tf32, train.tf32): inputs rounded to 10 mantissa bits, off by up to 2^-11
// relative rounded to nearest (as cuBLAS does), 2^-10 truncated. Over K products of unit
// normals (K = 256 for the matmul, 16 * 9 = 144 for the conv) the errors add up like a
// random walk, to about 5e-3 (matmul) and 3.5e-3 (conv) standard deviation per output,
// and the largest of the ~3000 outputs is 3 to 4 times that: TF32 emulated on these very
// inputs errs by 1.7e-2 (matmul) and 1.3e-2 (conv) rounded to nearest, 4.6e-2 and 3.6e-2
// truncated. So real TF32 stays below 8e-2 (room left for a conv algorithm that
// transforms its inputs) and well above 2e-3, while exact fp32 (the default) stays
// within 1e-4: a matmul TF32 switch that changed nothing fails the lower bound. The conv
// has no lower bound: TF32 allows cuDNN tensor-core algorithms, and cuDNN may still rank
// an FMA one first for a shape this small.
TEST(CudaOps, Tf32PolicyIsHonouredForMatmulAndConv) {
  ZT_SKIP_WITHOUT_GPU();
  const Tf32Policy saved = zt::tf32();
  Conv2dArgs pad1;
  pad1.padding = {1, 1, 1, 1};
  auto max_abs = [](const Tensor& t) { return max(abs(t)).item(); };
  Tensor a = randn_cpu({64, 256}, 31), b = randn_cpu({256, 48}, 32);
  Tensor x = randn_cpu({2, 16, 12, 12}, 33), w = randn_cpu({8, 16, 3, 3}, 34);
  const Tensor mm_ref = matmul(a, b), conv_ref = conv2d(x, w, Tensor(), pad1);
  auto errors = [&] {
    const double mm = max_abs(sub(matmul(a.to(kGpu), b.to(kGpu)).to(Device::cpu()), mm_ref));
    const double cv =
        max_abs(sub(conv2d(x.to(kGpu), w.to(kGpu), Tensor(), pad1).to(Device::cpu()), conv_ref));
    return std::pair{mm, cv};
  };
  zt::set_tf32({.matmul = false, .conv = false});
  auto [mm_exact, conv_exact] = errors();
  EXPECT_LT(mm_exact, 1e-4);
  EXPECT_LT(conv_exact, 1e-4);
  zt::set_tf32({.matmul = true, .conv = true});
  auto [mm_fast, conv_fast] = errors();
  zt::set_tf32(saved);
  EXPECT_LT(mm_fast, 8e-2);
  EXPECT_LT(conv_fast, 8e-2);
  EXPECT_GT(mm_fast, std::max(2e-3, 10 * mm_exact)) << "the matmul did not use TF32";
}

// Work counters on the GPU: a kernel launches without waiting; reading a value back is
// one device-to-host copy and one synchronization.
TEST(CudaOps, WorkCountsLaunchesCopiesAndSyncs) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor a = randn_cpu({32, 32}, 35).to(kGpu);
  (void)matmul(a, a);  // handles and caches created outside the counted stretch
  const WorkCounts before = work_counts();
  Tensor c = add(matmul(a, a), 1.0);
  const WorkCounts queued = work_counts() - before;
  EXPECT_GE(queued.launches, 2);
  EXPECT_EQ(queued.syncs, 0);
  EXPECT_EQ(queued.d2h_copies, 0);
  (void)c.narrow(0, 0, 1).narrow(1, 0, 1).item();
  const WorkCounts read = work_counts() - before;
  EXPECT_EQ(read.d2h_copies, 1);
  EXPECT_EQ(read.syncs, 1);
}

// An upload from host memory (a batch each step) queues without a host wait: the driver
// has taken the staged host copy when the call returns, so it may be freed and reused at
// once, and each upload still lands whole.
TEST(CudaOps, UploadsQueueWithoutAHostWait) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t n = int64_t{1} << 20;
  std::vector<Tensor> dev;
  const WorkCounts before = work_counts();
  for (int k = 0; k < 4; ++k) {
    dev.push_back(Tensor::empty({n}, DType::f32, kGpu));
    dev.back().copy_(full({n}, static_cast<double>(k)));  // the host source freed right after
  }
  const WorkCounts queued = work_counts() - before;
  EXPECT_EQ(queued.h2d_copies, 4);
  EXPECT_EQ(queued.syncs, 0);
  for (int k = 0; k < 4; ++k)
    EXPECT_TRUE(test::all_close(dev[k].to(Device::cpu()), full({n}, static_cast<double>(k)), 0, 0))
        << k;
}

#endif  // ZT_WITH_CUDA
