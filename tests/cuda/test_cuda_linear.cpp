// The GEMM with a fused bias / GELU epilogue (cublasLtMatmul with the BIAS and
// GELU_AUX_BIAS epilogues; gemm plus elementwise kernels for f64 and for GELU with a
// width that is not a multiple of 8), its backward pass (GELU gradient and bias column
// sums), the timed cuBLASLt choice (gemm_benchmark), and linear / linear_gelu forward and
// backward on the GPU against the CPU. Tolerances: f32
// and f64 differ by summation order and tanh's last bits (1e-4 and 1e-10, TF32 off); bf16 by bf16
// roundings of the products' inputs and outputs (2^-8 relative), compounded through the backward's
// products: 5e-2 for values of order 1. Without a GPU every test skips and says why.
#include "cuda/cuda_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <utility>

#ifdef ZT_WITH_CUDA
#include "core/algo_policy.h"
#include "core/cuda/gemm.h"
#include "core/cuda/stream.h"
#include "core/kernels.h"
#include "core/work_counts.h"
#endif

using namespace zt;
using namespace zt::cuda_test;

namespace {

double tol_for(DType dt) {
  return dt == DType::bf16 ? 5e-2 : (dt == DType::f32 ? 1e-4 : 1e-10);
}
}  // namespace

#ifdef ZT_WITH_CUDA
TEST(CudaLinear, GemmEpilogueMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  ASSERT_FALSE(zt::tf32().matmul);
  const int64_t M = 37, K = 40;
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    for (int64_t N : {24, 13}) {  // 13: GELU takes the composed path (aux ld not 8k)
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          for (bool gelu : {false, true}) {
            for (bool has_bias : {false, true}) {
              SCOPED_TRACE(std::string(dtype_name(dt)) + " N=" + std::to_string(N) +
                           " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                           " gelu=" + std::to_string(gelu) + " bias=" + std::to_string(has_bias));
              Tensor a = normal_cpu(ta ? Shape{K, M} : Shape{M, K}, 1, dt);
              Tensor b = normal_cpu(tb ? Shape{N, K} : Shape{K, N}, 2, dt);
              Tensor bias = has_bias ? normal_cpu({N}, 3, dt) : Tensor();
              auto run = [&](Device dev) {
                Tensor da = a.to(dev), db = b.to(dev);
                Tensor dbias = has_bias ? bias.to(dev) : Tensor();
                Tensor out = Tensor::empty({M, N}, dt, dev), aux;
                if (gelu) aux = Tensor::empty({M, N}, dt, dev);
                Tensor va = ta ? da.transpose(0, 1) : da, vb = tb ? db.transpose(0, 1) : db;
                if (dev.is_cuda()) {
                  cuda::gemm_epilogue(ta, tb, M, N, K, va, da.size(1), vb, db.size(1), dbias, gelu,
                                      out, aux);
                } else {
                  cpu::gemm_epilogue(ta, tb, M, N, K, va, da.size(1), vb, db.size(1), dbias, gelu,
                                     out, aux);
                }
                return std::pair<Tensor, Tensor>{out.to(kCpu), gelu ? aux.to(kCpu) : Tensor()};
              };
              auto [gout, gaux] = run(kGpu);
              auto [cout, caux] = run(kCpu);
              const double tol = tol_for(dt);
              EXPECT_TRUE(test::all_close(gout.to(DType::f64), cout.to(DType::f64), tol, tol));
              if (gelu) {
                EXPECT_TRUE(test::all_close(gaux.to(DType::f64), caux.to(DType::f64), tol, tol));
              }
            }
          }
        }
      }
    }
  }
}

TEST(CudaLinear, GemmEpilogueTakesBiasAndAuxAtOddOffsets) {
  // Views one element into their storage: not 16-byte aligned, so the composed path runs
  // instead of cuBLASLt's epilogue, with the same result.
  ZT_SKIP_WITHOUT_GPU();
  const int64_t M = 16, N = 24, K = 32;
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = normal_cpu({M, K}, 4, dt), b = normal_cpu({K, N}, 5, dt);
    Tensor bias_store = normal_cpu({N + 1}, 6, dt);
    Tensor out = Tensor::empty({M, N}, dt), aux = Tensor::empty({M, N}, dt);
    cpu::gemm_epilogue(false, false, M, N, K, a, K, b, N, bias_store.narrow(0, 1, N), true, out,
                       aux);
    Tensor gbias = bias_store.to(kGpu).narrow(0, 1, N);
    Tensor gaux = Tensor::empty({M * N + 1}, dt, kGpu).narrow(0, 1, M * N).view({M, N});
    Tensor gout = Tensor::empty({M, N}, dt, kGpu);
    cuda::gemm_epilogue(false, false, M, N, K, a.to(kGpu), K, b.to(kGpu), N, gbias, true, gout,
                        gaux);
    const double tol = tol_for(dt);
    EXPECT_TRUE(test::all_close(gout.to(kCpu).to(DType::f64), out.to(DType::f64), tol, tol));
    EXPECT_TRUE(test::all_close(gaux.to(kCpu).to(DType::f64), aux.to(DType::f64), tol, tol));
  }
}

// set_gemm_benchmark (train.gemm_benchmark): every non-f64 GEMM runs through cuBLASLt's
// timed candidates. A problem's first call waits on the host once per candidate timed (at
// most 8; in bf16 at least one), later calls of the same problem not at all; an accumulating gemm
// (beta 1) still adds to what its output held (the timing runs wrote a scratch output), and the
// bias / GELU epilogue matches the CPU.
TEST(CudaLinear, GemmBenchmarkTimesEachProblemOnceAndMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  struct Restore {
    bool was = gemm_benchmark();
    ~Restore() { set_gemm_benchmark(was); }
  } restore;
  set_gemm_benchmark(true);
  const int64_t M = 256, N = 136, K = 512;
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = normal_cpu({M, K}, 14, dt), b = normal_cpu({K, N}, 15, dt);
    const Tensor c0 = normal_cpu({M, N}, 16, dt);
    const Tensor ga = a.to(kGpu), gb = b.to(kGpu), gc = c0.to(kGpu);
    const WorkCounts before = work_counts();
    cuda::gemm(false, false, M, N, K, 1.0, ga, K, gb, N, 1.0, gc, N);  // gc = a b + c0
    const int64_t first_waits = work_counts().syncs - before.syncs;
    EXPECT_LE(first_waits, 8) << "one wait per timed candidate";
    // cuBLASLt offers several bf16 tensor-core algorithms for a problem of this size: none
    // timed would mean the benchmark chose nothing.
    if (dt == DType::bf16) {
      EXPECT_GE(first_waits, 1) << "the candidates were timed";
    }
    const WorkCounts again = work_counts();
    cuda::gemm(false, false, M, N, K, 1.0, ga, K, gb, N, 1.0, gc, N);  // gc = 2 a b + c0
    EXPECT_EQ(work_counts().syncs - again.syncs, 0) << "the choice is kept";
    const Tensor ab = matmul(a.to(DType::f64), b.to(DType::f64));
    const double tol = tol_for(dt);
    EXPECT_TRUE(
        test::all_close(gc.to(kCpu).to(DType::f64), ab * 2.0 + c0.to(DType::f64), tol, tol));

    const Tensor bias = normal_cpu({N}, 17, dt);
    Tensor out = Tensor::empty({M, N}, dt), aux = Tensor::empty({M, N}, dt);
    cpu::gemm_epilogue(false, false, M, N, K, a, K, b, N, bias, true, out, aux);
    Tensor gout = Tensor::empty({M, N}, dt, kGpu), gaux = Tensor::empty({M, N}, dt, kGpu);
    cuda::gemm_epilogue(false, false, M, N, K, ga, K, gb, N, bias.to(kGpu), true, gout, gaux);
    EXPECT_TRUE(test::all_close(gout.to(kCpu).to(DType::f64), out.to(DType::f64), tol, tol));
    EXPECT_TRUE(test::all_close(gaux.to(kCpu).to(DType::f64), aux.to(DType::f64), tol, tol));
  }
}

TEST(CudaLinear, GemmEpilogueBackwardMatchesCpu) {
  ZT_SKIP_WITHOUT_GPU();
  // 1100 rows: five row chunks, the last partly filled; 70 columns: a partial column block
  // of the one-column path; 72 and 776: whole 16-byte runs (the 16-byte path), 776 with a
  // partial column block.
  const int64_t M = 1100;
  for (int64_t N : {70, 72, 776})
    for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      // Sums in double on both devices, in different orders; GELU's exponential and
      // reciprocal (the hardware's on the GPU) may differ in the last bit, which can flip a
      // 16-bit rounding (2^-8 relative in bf16, 2^-11 in f16; the bias sums add a few).
      const double tol = dt == DType::bf16  ? 1e-2
                         : dt == DType::f16 ? 5e-3
                         : dt == DType::f32 ? 1e-5
                                            : 1e-10;
      for (bool gelu : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " N=" + std::to_string(N) +
                     " gelu=" + std::to_string(gelu));
        Tensor dy = normal_cpu({M, N}, 16, dt), aux = normal_cpu({M, N}, 17, dt);
        Tensor cdpre = Tensor::empty({M, N}, dt), cdb = Tensor::empty({N}, dt);
        cpu::gemm_epilogue_backward(M, N, dy, aux, gelu, cdpre, cdb);
        Tensor gdy = dy.to(kGpu), gaux = aux.to(kGpu);
        Tensor gdpre = Tensor::empty({M, N}, dt, kGpu), gdb = Tensor::empty({N}, dt, kGpu);
        cuda::gemm_epilogue_backward(M, N, gdy, gaux, gelu, gdpre, gdb);
        if (gelu) {
          EXPECT_TRUE(
              test::all_close(gdpre.to(kCpu).to(DType::f64), cdpre.to(DType::f64), tol, tol));
        }
        EXPECT_TRUE(test::all_close(gdb.to(kCpu).to(DType::f64), cdb.to(DType::f64), tol, tol));
      }
    }
}

// More chunks of 256 rows than a grid's y dimension holds (65535): one row more than the
// grid's chunks cover, alone in a chunk that grid row 0 takes on its second pass. One f32
// column (the one-column path; the 16-byte path shares the loop): 16.8M rows, 67 MB a
// tensor. The last row's dy is 1000 at aux 1 (GELU' 1.08): the bias gradient, -327, would be
// 1083 lower without it, and its dpre would be unwritten. Tolerance 1e-5 (3e-3 on the sum):
// GELU's last bits differing, even in every row, add up to about 2.5e-4.
TEST(CudaLinear, GemmEpilogueBackwardOverMoreRowChunksThanTheGridHolds) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t M = 65535 * 256 + 1, N = 1;
  const Tensor dy = normal_cpu({M, N}, 18), aux = normal_cpu({M, N}, 19);
  dy.narrow(0, M - 1, 1).fill_(1000.0);
  aux.narrow(0, M - 1, 1).fill_(1.0);
  Tensor cdpre = Tensor::empty({M, N}, DType::f32), cdb = Tensor::empty({N}, DType::f32);
  cpu::gemm_epilogue_backward(M, N, dy, aux, true, cdpre, cdb);
  Tensor gdpre = Tensor::empty({M, N}, DType::f32, kGpu),
         gdb = Tensor::empty({N}, DType::f32, kGpu);
  cuda::gemm_epilogue_backward(M, N, dy.to(kGpu), aux.to(kGpu), true, gdpre, gdb);
  EXPECT_TRUE(test::all_close(gdpre.to(kCpu), cdpre, 1e-5, 1e-5));
  EXPECT_TRUE(test::all_close(gdb.to(kCpu).to(DType::f64), cdb.to(DType::f64), 1e-5, 1e-5));
}

TEST(CudaLinear, GemmEpilogueBackwardGivesTheSameBitsOnBothPaths) {
  ZT_SKIP_WITHOUT_GPU();
  // 72 columns of bf16: whole 16-byte runs; the same values one element past a 16-byte
  // boundary take the one-column path, and every column adds its rows in the same order.
  const int64_t M = 1100, N = 72;
  auto misaligned = [&](const Tensor& t) {
    Tensor buf = Tensor::empty({M * N + 8}, t.dtype(), kGpu);
    Tensor v = buf.narrow(0, 1, M * N).view({M, N});
    v.copy_(t);
    return v;
  };
  const Tensor dy = normal_cpu({M, N}, 16, DType::bf16).to(kGpu);
  const Tensor aux = normal_cpu({M, N}, 17, DType::bf16).to(kGpu);
  auto run = [&](const Tensor& d, const Tensor& a, const Tensor& dpre) {
    Tensor db = Tensor::empty({N}, DType::bf16, kGpu);
    cuda::gemm_epilogue_backward(M, N, d, a, true, dpre, db);
    return db;
  };
  const Tensor dpre = Tensor::empty({M, N}, DType::bf16, kGpu);
  const Tensor odpre = misaligned(dpre);
  const Tensor db = run(dy, aux, dpre), odb = run(misaligned(dy), misaligned(aux), odpre);
  auto bits = [](const Tensor& t) { return t.to(kCpu).to(DType::f64); };
  EXPECT_TRUE(test::all_close(bits(odb), bits(db), 0.0, 0.0));
  EXPECT_TRUE(test::all_close(bits(odpre), bits(dpre), 0.0, 0.0));
}
#endif

// cuBLAS runs with a workspace of its own on each stream (32 MiB from Hopper on, unless
// ZT_CUBLAS_WORKSPACE says otherwise), made at the first GEMM there and kept: a second
// GEMM on that stream allocates nothing more, and the products match the CPU's. So on the
// default stream, where a new thread starts. (The products are activations here, so that
// the workspace alone counts as other memory; under gemm_benchmark they would run through
// cuBLASLt, which takes its workspace per call, so it is off.)
TEST(CudaLinear, CublasGetsAWorkspaceOnEachStream) {
  ZT_SKIP_WITHOUT_GPU();
#ifdef ZT_WITH_CUDA  // (without CUDA the test skips before it gets here)
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  const size_t bytes = cuda::cublas_workspace_bytes(0);
  if (std::getenv("ZT_CUBLAS_WORKSPACE") == nullptr) {
    EXPECT_EQ(bytes, (major >= 9 ? size_t{32} : size_t{4}) << 20);
  }
  const Tensor a = normal_cpu({64, 96}, 7, DType::bf16), b = normal_cpu({96, 80}, 8, DType::bf16);
  const Tensor want = matmul(a, b);
  const Tensor ga = a.to(kGpu), gb = b.to(kGpu);
  auto on_this_stream = [&](const char* where) {
    SCOPED_TRACE(where);
    const bool timed = gemm_benchmark();
    set_gemm_benchmark(false);
    MemTagScope tag(MemTag::kActivation);
    const int64_t before = memory_stats(kGpu).cur(MemTag::kOther);
    const Tensor first = matmul(ga, gb);
    const int64_t after_first = memory_stats(kGpu).cur(MemTag::kOther);
    EXPECT_GE(after_first - before, static_cast<int64_t>(bytes)) << "the stream's workspace";
    const Tensor second = matmul(ga, gb);
    EXPECT_EQ(memory_stats(kGpu).cur(MemTag::kOther), after_first) << "kept, not made again";
    EXPECT_TRUE(zt::test::all_close(first.to(kCpu), want, 5e-2, 5e-2));
    EXPECT_TRUE(zt::test::all_close(second.to(kCpu), first.to(kCpu), 0, 0));
    set_gemm_benchmark(timed);
  };
  {
    cuda::Stream side;
    cuda::StreamGuard guard(side);
    on_this_stream("a side stream");
  }
  std::thread([&] { on_this_stream("a new thread's default stream"); }).join();
#endif
}

// 16-bit GEMMs accumulate in f32, also where k is long enough for split-K kernels: a bf16
// product of positive values with k = 65536 (cuBLAS's matmul and cuBLASLt's linear) is
// within one bf16 step of the exact sum everywhere, and on average within the quarter
// step one rounding of the output gives; partial sums added in bf16 round several times.
TEST(CudaLinear, Bf16ProductsWithALongKAccumulateInF32) {
  ZT_SKIP_WITHOUT_GPU();
  const int64_t M = 64, N = 64, K = 65536;
  manual_seed(21);
  const Tensor a = (rand({M, K}) + 1.0).to(DType::bf16), w = (rand({N, K}) + 1.0).to(DType::bf16);
  const std::vector<double> exact =
      matmul(a.to(DType::f64), w.to(DType::f64).transpose(0, 1)).to_vector();
  const Tensor ga = a.to(kGpu), gw = w.to(kGpu);
  for (const auto& [name, got] :
       {std::pair{"matmul", matmul(ga, gw.transpose(0, 1))}, std::pair{"linear", linear(ga, gw)}}) {
    SCOPED_TRACE(name);
    const std::vector<double> g = got.to(kCpu).to(DType::f64).to_vector();
    double worst = 0, mean = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      // One bf16 step at exact[i]: 2^(exponent - 7).
      const double step = std::ldexp(1.0, std::ilogb(exact[i]) - 7);
      const double steps = std::fabs(g[i] - exact[i]) / step;
      worst = std::max(worst, steps);
      mean += steps / static_cast<double>(g.size());
    }
    EXPECT_LE(worst, 1.0);
    EXPECT_LE(mean, 0.35);
  }
}

TEST(CudaLinear, LinearAndLinearGeluForwardBackwardMatchCpu) {
  ZT_SKIP_WITHOUT_GPU();
  ASSERT_FALSE(zt::tf32().matmul);
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    for (bool has_bias : {false, true}) {
      for (int64_t fout : {64, 13}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " bias=" + std::to_string(has_bias) +
                     " F_out=" + std::to_string(fout));
        std::vector<Tensor> in{normal_cpu({3, 17, 48}, 4, dt), normal_cpu({fout, 48}, 5, dt)};
        if (has_bias) in.push_back(normal_cpu({fout}, 6, dt));
        auto bias_of = [has_bias](const std::vector<Tensor>& v) {
          return has_bias ? v[2] : Tensor();
        };
        Fn fused = [&](const std::vector<Tensor>& v) {
          return linear_gelu(v[0], v[1], bias_of(v));
        };
        Fn plain = [&](const std::vector<Tensor>& v) { return linear(v[0], v[1], bias_of(v)); };
        const double tol = tol_for(dt);
        EXPECT_TRUE(runs_match(run_on(kGpu, fused, in), run_on(kCpu, fused, in), tol, tol));
        EXPECT_TRUE(runs_match(run_on(kGpu, plain, in), run_on(kCpu, plain, in), tol, tol));
      }
    }
  }
}
