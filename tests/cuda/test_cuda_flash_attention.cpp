// The fused attention kernels on the GPU (ldmatrix and mma.sync on tensor cores)
// against their host emulation (the same tiles, core/cuda/flash_tiles.h, run by the CPU
// suite) and against the GEMM path in f32: outputs and gradients, bf16 and f16, every
// supported head dim, causal and not, tails that fill no whole tile, a transformer's
// strided head views, and replays from a CUDA graph. Tolerances (relative, 2-norm) are
// the CPU test's: the 16-bit roundings of results and probabilities give 2e-3 .. 3e-3
// in bf16 and 2e-4 .. 4e-4 in f16 against f32; the GPU differs from the emulation only
// by exp2's last bit (and its flush to 0 below 2^-126) and the tensor cores' order of summation,
// which move a few of those roundings. Without a GPU every test skips and says why.
#include "common/attention_cases.h"
#include "core/step_graph.h"
#include "cuda/cuda_compare.h"

using namespace zt;
using namespace zt::cuda_test;

TEST(CudaFlashAttention, MatchesItsHostEmulationAndF32) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt : {DType::bf16, DType::f16}) {
    for (int64_t d : {32, 64, 96, 128}) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " D=" + std::to_string(d) +
                     " causal=" + std::to_string(causal));
        // 37 rows: two whole tiles of 16 and a tail of 5.
        const Tensor q = normal_cpu({2, 3, 37, d}, 1, dt), k = normal_cpu({2, 3, 37, d}, 2, dt),
                     v = normal_cpu({2, 3, 37, d}, 3, dt);
        test::AttentionGrads gpu;
        // automatic takes the fused kernels on a GPU.
        ASSERT_TRUE(test::runs_fused([&] {
          gpu = test::attention_grads(AttentionKernel::automatic, q.to(kGpu), k.to(kGpu),
                                      v.to(kGpu), causal);
        }));
        const test::AttentionGrads host =
            test::attention_grads(AttentionKernel::flash, q, k, v, causal);
        const test::AttentionGrads f32 = test::attention_grads(
            AttentionKernel::math, q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), causal);
        EXPECT_TRUE(test::grads_close(gpu, host, test::flash_tolerance(dt)))
            << "against the host emulation";
        EXPECT_TRUE(test::grads_close(gpu, f32, test::flash_tolerance(dt))) << "against f32";
        EXPECT_EQ(gpu.out.device(), kGpu);
      }
    }
  }
}

TEST(CudaFlashAttention, EveryTileShapeMatchesItsHostEmulation) {
  ZT_SKIP_WITHOUT_GPU();
  // As on the host (FlashAttention.EveryTileShapeMatchesF32WithTheDefaultsBits): a row's
  // arithmetic does not depend on the warp that owns it, nor the backward's on its step,
  // so those shapes give the default's bits here too. 150 rows: a partly filled last tile.
  // The split backward, whatever ZT_FLASH_BACKWARD says: the atomic one's dq bits vary.
  using flash::Pass;
  test::FlashBackwardScope split(flash::Backward::split);
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    return test::all_close(a.to(kCpu).to(DType::f64), b.to(kCpu).to(DType::f64), 0.0, 0.0);
  };
  for (int64_t d : {32, 64}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE("D=" + std::to_string(d) + " causal=" + std::to_string(causal));
      const Tensor q = normal_cpu({2, 3, 150, d}, 1, DType::bf16),
                   k = normal_cpu({2, 3, 150, d}, 2, DType::bf16),
                   v = normal_cpu({2, 3, 150, d}, 3, DType::bf16);
      auto on_gpu = [&] {
        return test::attention_grads(AttentionKernel::automatic, q.to(kGpu), k.to(kGpu), v.to(kGpu),
                                     causal);
      };
      auto on_host = [&] { return test::attention_grads(AttentionKernel::flash, q, k, v, causal); };
      const test::AttentionGrads base = on_gpu();
      const int step = flash::tile_shape(Pass::forward, d).step_rows;
      for (const flash::TileShape& s : flash::tile_shapes(Pass::forward, d)) {
        SCOPED_TRACE("forward " + s.str());
        test::TileShapeScope shapes(s, {}, {});
        const test::AttentionGrads gpu = on_gpu();
        EXPECT_TRUE(test::grads_close(gpu, on_host(), test::flash_tolerance(DType::bf16)));
        if (s.step_rows == step) {
          EXPECT_TRUE(same_bits(gpu.out, base.out));
        }
      }
      for (const flash::TileShape& s : flash::tile_shapes(Pass::dq, d)) {
        SCOPED_TRACE("backward " + s.str());
        test::TileShapeScope shapes({}, s, s);
        const test::AttentionGrads gpu = on_gpu();
        EXPECT_TRUE(test::grads_close(gpu, on_host(), test::flash_tolerance(DType::bf16)));
        EXPECT_TRUE(same_bits(gpu.dq, base.dq));
        EXPECT_TRUE(same_bits(gpu.dk, base.dk));
        EXPECT_TRUE(same_bits(gpu.dv, base.dv));
      }
    }
  }
}

TEST(CudaFlashAttention, TheAtomicBackwardMatchesItsHostEmulationAndF32) {
  ZT_SKIP_WITHOUT_GPU();
  // flash::Backward::atomic on tensor cores, with real atomics: dq within the tolerance of
  // the host emulation's and of f32; dk and dv, and the output, keep the split backward's
  // bits on the GPU as on the host (FlashAttention.TheAtomicBackwardMatchesF32AndKeepsDkAndDvBits).
  // Every head dim, causal and not, 150 rows (a partly filled last tile); fewer queries than
  // keys and more, where dq's f32 buffer has the queries' rows and a key tile skips the rows
  // past the last query (no mask: causal attention needs Tq == Tk, and is refused); then
  // every dk / dv tile shape at D = 64, and a transformer's strided heads of GPT-2 small's
  // shape.
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    return test::all_close(a.to(kCpu).to(DType::f64), b.to(kCpu).to(DType::f64), 0.0, 0.0);
  };
  auto check = [&](const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                   const std::function<Tensor(const Tensor&)>& view) {
    auto on_gpu = [&] {
      return test::attention_grads(AttentionKernel::automatic, q.to(kGpu), k.to(kGpu), v.to(kGpu),
                                   causal, view);
    };
    const test::AttentionGrads split = on_gpu();
    test::FlashBackwardScope atomic(flash::Backward::atomic);
    test::AttentionGrads gpu;
    ASSERT_TRUE(test::runs_fused([&] { gpu = on_gpu(); }));
    const DType dt = q.dtype();
    const test::AttentionGrads host =
        test::attention_grads(AttentionKernel::flash, q, k, v, causal, view);
    const test::AttentionGrads f32 = test::attention_grads(
        AttentionKernel::math, q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), causal, view);
    EXPECT_TRUE(test::grads_close(gpu, host, test::flash_tolerance(dt))) << "against the host";
    EXPECT_TRUE(test::grads_close(gpu, f32, test::flash_tolerance(dt))) << "against f32";
    EXPECT_TRUE(same_bits(gpu.out, split.out));
    EXPECT_TRUE(same_bits(gpu.dk, split.dk));
    EXPECT_TRUE(same_bits(gpu.dv, split.dv));
  };
  auto as_is = [](const Tensor& t) { return t; };
  for (DType dt : {DType::bf16, DType::f16}) {
    for (int64_t d : {32, 64, 96, 128}) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " D=" + std::to_string(d) +
                     " causal=" + std::to_string(causal));
        check(normal_cpu({2, 3, 150, d}, 1, dt), normal_cpu({2, 3, 150, d}, 2, dt),
              normal_cpu({2, 3, 150, d}, 3, dt), causal, as_is);
      }
    }
  }
  for (DType dt : {DType::bf16, DType::f16}) {
    for (int64_t d : {64, 128}) {  // 4 warps a block, and 2
      for (const auto& [tq, tk] : {std::pair<int64_t, int64_t>{20, 70}, {70, 20}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " D=" + std::to_string(d) +
                     " Tq=" + std::to_string(tq) + " Tk=" + std::to_string(tk));
        const Tensor q = normal_cpu({2, 3, tq, d}, 7, dt), k = normal_cpu({2, 3, tk, d}, 8, dt),
                     v = normal_cpu({2, 3, tk, d}, 9, dt);
        check(q, k, v, false, as_is);
        EXPECT_THROW((void)scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), true),
                     zt::Error);
      }
    }
  }
  for (const flash::TileShape& s : flash::tile_shapes(flash::Pass::dkdv, 64)) {
    SCOPED_TRACE("dk / dv " + s.str());
    test::TileShapeScope shapes({}, {}, s);
    check(normal_cpu({2, 3, 150, 64}, 1, DType::bf16), normal_cpu({2, 3, 150, 64}, 2, DType::bf16),
          normal_cpu({2, 3, 150, 64}, 3, DType::bf16), true, as_is);
  }
  auto heads = [](const Tensor& t) { return t.permute({0, 2, 1, 3}); };
  check(normal_cpu({2, 300, 12, 64}, 4, DType::bf16), normal_cpu({2, 300, 12, 64}, 5, DType::bf16),
        normal_cpu({2, 300, 12, 64}, 6, DType::bf16), true, heads);
}

// A packed q/k/v projection's heads (fused_qkv): one gradient buffer, passed on whole.
TEST(CudaFlashAttention, PackedQkvGetOneGradientBufferThatReachesTheProjectionWhole) {
  ZT_SKIP_WITHOUT_GPU();
  Generator g(5);
  test::expect_packed_qkv_gradient_whole(
      randn({4, 256, 3 * 768}, g, DType::f64).to(DType::bf16).to(kGpu), 12);
}

TEST(CudaFlashAttention, TransformerHeadsInPlace) {
  ZT_SKIP_WITHOUT_GPU();
  // (B, T, H, D) projections viewed as (B, H, T, D) heads, 300 tokens (a tail of 12),
  // 12 heads of 64, causal; Tq != Tk without the mask.
  auto heads = [](const Tensor& t) { return t.permute({0, 2, 1, 3}); };
  const Tensor q = normal_cpu({2, 300, 12, 64}, 4, DType::bf16),
               k = normal_cpu({2, 300, 12, 64}, 5, DType::bf16),
               v = normal_cpu({2, 300, 12, 64}, 6, DType::bf16);
  test::AttentionGrads gpu;
  ASSERT_TRUE(test::runs_fused([&] {
    gpu = test::attention_grads(AttentionKernel::automatic, q.to(kGpu), k.to(kGpu), v.to(kGpu),
                                true, heads);
  }));
  EXPECT_TRUE(gpu.out.permute({0, 2, 1, 3}).is_contiguous());  // the heads merge as a view
  const test::AttentionGrads f32 = test::attention_grads(
      AttentionKernel::math, q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), true, heads);
  EXPECT_TRUE(test::grads_close(gpu, f32, test::flash_tolerance(DType::bf16)));
  const Tensor kv = normal_cpu({2, 40, 12, 64}, 7, DType::bf16);
  const test::AttentionGrads cross = test::attention_grads(AttentionKernel::automatic, q.to(kGpu),
                                                           kv.to(kGpu), kv.to(kGpu), false, heads);
  const test::AttentionGrads cross_f32 = test::attention_grads(
      AttentionKernel::math, q.to(DType::f32), kv.to(DType::f32), kv.to(DType::f32), false, heads);
  EXPECT_TRUE(test::grads_close(cross, cross_f32, test::flash_tolerance(DType::bf16)));
}

TEST(CudaFlashAttention, ReplaysFromACudaGraph) {
  ZT_SKIP_WITHOUT_GPU();
  // Fused attention forward and backward as a step captured once (core/step_graph.h):
  // each replay on a new batch equals an eager step on it bit for bit (the kernels have
  // no atomics under the split backward, so their bits do not depend on the stream).
  test::FlashBackwardScope split(flash::Backward::split);
  const Shape shape{2, 4, 40, 64};
  const Tensor kv = normal_cpu(shape, 30, DType::bf16).to(kGpu);
  const Tensor up = normal_cpu(shape, 31, DType::bf16).to(kGpu);
  auto step_on = [&](const Tensor& x) -> StepGraph::Step {
    return [x, kv, up] {
      Tensor q = x.detach(), k = kv.detach();
      q.set_requires_grad(true);
      k.set_requires_grad(true);
      Tensor out = scaled_dot_product_attention(q, k, k, true);
      out.backward(up);
      return std::vector<Tensor>{out, q.grad(), k.grad()};
    };
  };
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    return test::all_close(a.to(kCpu).to(DType::f64), b.to(kCpu).to(DType::f64), 0.0, 0.0);
  };
  StepGraph graph(kGpu);
  for (int k = 0; k < 5; ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const Tensor batch = normal_cpu(shape, 40 + static_cast<uint64_t>(k), DType::bf16);
    std::vector<Tensor> eager;
    ASSERT_TRUE(test::runs_fused([&] { eager = step_on(batch.to(kGpu))(); }));
    const std::vector<Tensor> replayed = graph.run(step_on(graph.stage(batch)), [] {});
    ASSERT_EQ(replayed.size(), eager.size());
    for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(same_bits(replayed[i], eager[i])) << i;
  }
  EXPECT_TRUE(graph.captured());
}
