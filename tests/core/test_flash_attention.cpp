// The fused attention kernels (core/cuda/flash_tiles.h), run on the CPU by their warp
// emulation (ldmatrix, mma.sync and shuffles laid out as on the GPU) under
// AttentionKernel::flash, against the GEMM path in f32 on the same 16-bit inputs:
// outputs, gradients and each row's log-sum-exp, causal and not, every supported head
// dim, tails that fill no whole tile, the heads' strided layout, and the cases that fall
// back to the GEMM path.
// Tolerances (relative, in the 2-norm): the fused path rounds its results, and the
// probabilities and ds before their products, to the inputs' 16 bits (as the GEMM path
// does in bf16). Measured against f32: 2e-3 .. 3e-3 in bf16, 2e-4 .. 4e-4 in f16, about
// the rounding of the results alone; held to 6e-3 and 8e-4. A fragment mapped to the
// wrong rows or columns gives errors of order 1.

#include <string>

#include "common/attention_cases.h"
#include "common/test_util.h"
#include "core/cuda/flash_dispatch.h"

using namespace zt;

namespace {

Tensor normals(const Shape& s, uint64_t seed, DType dt) {
  Generator g(seed);
  return randn(s, g, DType::f64).to(dt);
}

// The fused path on 16-bit q, k, v against the GEMM path on their f32 values.
void expect_matches_f32(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  test::AttentionGrads got;
  // The fused kernels fall back to the GEMM path silently where they do not apply.
  EXPECT_TRUE(test::runs_fused([&] {
    got = test::attention_grads(AttentionKernel::flash, q, k, v, causal);
  })) << "the fused kernels did not run";
  const test::AttentionGrads want = test::attention_grads(
      AttentionKernel::math, q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), causal);
  EXPECT_TRUE(test::grads_close(got, want, test::flash_tolerance(q.dtype())));
  EXPECT_EQ(got.out.dtype(), q.dtype());
  EXPECT_EQ(got.dq.dtype(), q.dtype());
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && test::all_close(a, b, 0.0, 0.0);
}

// The passes the backward runs under the way to dq set now, in order, as the CPU and CUDA
// kernels run them (both through flash::backward_passes), with "zero" where the atomic
// backward's f32 dq buffer is zeroed.
std::string backward_passes_run() {
  using flash::Pass;
  flash::Params p{};
  std::string ran;
  auto name = [](Pass pass) {
    switch (pass) {
      case Pass::forward:
        return "forward";
      case Pass::dq:
        return "dq";
      case Pass::dkdv:
        return "dkdv";
      case Pass::prepare:
        return "prepare";
      case Pass::dkdvq:
        return "dkdvq";
      case Pass::dq_finish:
        return "dq_finish";
    }
    return "?";
  };
  flash::backward_passes(
      p, [&]<Pass kPass>() { ran += std::string(ran.empty() ? "" : " ") + name(kPass); },
      [&] {
        ran += std::string(ran.empty() ? "" : " ") + "zero";
        return static_cast<float*>(nullptr);
      });
  return ran;
}

}  // namespace

TEST(FlashAttention, MatchesTheGemmPathInF32) {
  for (DType dt : {DType::bf16, DType::f16}) {
    for (int64_t d : {32, 64, 96, 128}) {
      // 37 rows: one block's tile (64 rows up to D = 64, 32 above) or two; 150: three or
      // five, the last one partly filled, and steps of 32 or 16 rows of the other side.
      for (int64_t t : {37, 150}) {
        for (bool causal : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " D=" + std::to_string(d) +
                       " T=" + std::to_string(t) + " causal=" + std::to_string(causal));
          const Tensor q = normals({2, 2, t, d}, 1, dt), k = normals({2, 2, t, d}, 2, dt),
                       v = normals({2, 2, t, d}, 3, dt);
          expect_matches_f32(q, k, v, causal);
        }
      }
    }
  }
}

TEST(FlashAttention, EveryTileShapeMatchesF32WithTheDefaultsBits) {
  // Which warp owns a row does not change its arithmetic, nor does the backward's step:
  // it adds the other side's 16-row chunks in order. The forward's step sets where its
  // running max moves, so only a forward with another step may differ in the last bits.
  // 150 rows: tiles of 64 or 128 rows, the last one partly filled. The split backward,
  // whatever ZT_FLASH_BACKWARD says (the atomic one's dq bits depend on the threads).
  using flash::Pass;
  test::FlashBackwardScope split(flash::Backward::split);
  for (int64_t d : {32, 64}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE("D=" + std::to_string(d) + " causal=" + std::to_string(causal));
      const Tensor q = normals({2, 2, 150, d}, 1, DType::bf16),
                   k = normals({2, 2, 150, d}, 2, DType::bf16),
                   v = normals({2, 2, 150, d}, 3, DType::bf16);
      const test::AttentionGrads base =
          test::attention_grads(AttentionKernel::flash, q, k, v, causal);
      const flash::TileShape step = flash::tile_shape(Pass::forward, d);
      for (const flash::TileShape& s : flash::tile_shapes(Pass::forward, d)) {
        SCOPED_TRACE("forward " + s.str());
        test::TileShapeScope shapes(s, {}, {});
        ASSERT_EQ(flash::tile_shape(Pass::forward, d), s);
        expect_matches_f32(q, k, v, causal);
        const test::AttentionGrads got =
            test::attention_grads(AttentionKernel::flash, q, k, v, causal);
        if (s.step_rows == step.step_rows) {
          EXPECT_TRUE(same_bits(got.out, base.out));
        }
      }
      for (const flash::TileShape& s : flash::tile_shapes(Pass::dq, d)) {
        SCOPED_TRACE("backward " + s.str());
        test::TileShapeScope shapes({}, s, s);
        const test::AttentionGrads got =
            test::attention_grads(AttentionKernel::flash, q, k, v, causal);
        EXPECT_TRUE(same_bits(got.dq, base.dq));
        EXPECT_TRUE(same_bits(got.dk, base.dk));
        EXPECT_TRUE(same_bits(got.dv, base.dv));
      }
    }
  }
}

TEST(FlashAttention, TheAtomicBackwardMatchesF32AndKeepsDkAndDvBits) {
  // flash::Backward::atomic: dk and dv come from the same products in the same order as
  // the split backward's (delta's sum too), so they keep its bits; dq is the same sum of
  // products with the key tiles' shares added in f32 in another order, within the
  // split one's rounding of it. Both block sizes (4 warps up to D = 64, 2 above), one
  // tile and several, causal and not; then every dk / dv tile shape.
  using flash::Pass;
  // The comparisons are of the two ways: under each setting the backward runs its own
  // passes (the atomic one's dq bits may equal the split one's, so they cannot tell).
  {
    test::FlashBackwardScope split(flash::Backward::split);
    EXPECT_EQ(backward_passes_run(), "dq dkdv");
    test::FlashBackwardScope atomic(flash::Backward::atomic);
    EXPECT_EQ(backward_passes_run(), "zero prepare dkdvq dq_finish");
  }
  auto check = [](const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
    const test::AttentionGrads split = [&] {
      test::FlashBackwardScope scope(flash::Backward::split);  // whatever the env says
      return test::attention_grads(AttentionKernel::flash, q, k, v, causal);
    }();
    test::FlashBackwardScope atomic(flash::Backward::atomic);
    expect_matches_f32(q, k, v, causal);
    const test::AttentionGrads got = test::attention_grads(AttentionKernel::flash, q, k, v, causal);
    EXPECT_TRUE(same_bits(got.out, split.out));
    EXPECT_TRUE(same_bits(got.dk, split.dk));
    EXPECT_TRUE(same_bits(got.dv, split.dv));
    EXPECT_LT(test::relative_error(got.dq, split.dq), test::flash_tolerance(q.dtype()));
  };
  for (DType dt : {DType::bf16, DType::f16}) {
    for (int64_t d : {64, 128}) {
      for (int64_t t : {37, 150}) {
        for (bool causal : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " D=" + std::to_string(d) +
                       " T=" + std::to_string(t) + " causal=" + std::to_string(causal));
          check(normals({2, 2, t, d}, 1, dt), normals({2, 2, t, d}, 2, dt),
                normals({2, 2, t, d}, 3, dt), causal);
        }
      }
    }
  }
  for (const flash::TileShape& s : flash::tile_shapes(Pass::dkdv, 32)) {
    SCOPED_TRACE("dk / dv " + s.str());
    test::TileShapeScope shapes({}, {}, s);
    check(normals({1, 2, 150, 32}, 1, DType::bf16), normals({1, 2, 150, 32}, 2, DType::bf16),
          normals({1, 2, 150, 32}, 3, DType::bf16), true);
  }
  // Fewer queries than keys and more (no mask): the dq buffer's rows are the queries'.
  check(normals({1, 2, 20, 64}, 4, DType::bf16), normals({1, 2, 70, 64}, 5, DType::bf16),
        normals({1, 2, 70, 64}, 6, DType::bf16), false);
  check(normals({1, 2, 70, 64}, 4, DType::bf16), normals({1, 2, 20, 64}, 5, DType::bf16),
        normals({1, 2, 20, 64}, 6, DType::bf16), false);
}

// q, k and v split from one (B, T, 3E) projection (nn::MultiheadSelfAttention's
// fused_qkv) get their gradients in one buffer at the same places, and split() hands that
// buffer to the projection as it is: the same bits as q, k and v copied apart, without
// the three copies that join separate buffers.
TEST(FlashAttention, PackedQkvGetOneGradientBufferThatReachesTheProjectionWhole) {
  Generator g(5);
  test::expect_packed_qkv_gradient_whole(randn({2, 37, 3 * 128}, g, DType::f64).to(DType::bf16), 2);
}

namespace {

// The gradients the flash attention hands each of q, k and v (pieces of x), when they
// are the views make_piece(x, i) and when they are copies of them.
std::vector<Tensor> gradients_seen(const Tensor& x,
                                   const std::function<Tensor(const Tensor&, int64_t)>& piece,
                                   bool views) {
  test::AttentionKernelScope scope(AttentionKernel::flash);
  std::vector<Tensor> in;
  for (int64_t i = 0; i < 3; ++i) in.push_back(views ? piece(x, i) : piece(x, i).contiguous());
  std::vector<Tensor> seen(3);  // each input's gradient, as the attention returns it
  const std::vector<Tensor> spied = autograd::apply_function(
      "spy", in, [](const std::vector<Tensor>& t) { return t; },
      [&seen](const std::vector<Tensor>& g) {
        seen = g;
        return g;
      });
  const Tensor out = scaled_dot_product_attention(spied[0], spied[1], spied[2], true);
  out.backward(normals(out.sizes(), 9, DType::bf16));
  return seen;
}

}  // namespace

// Views at equal steps that overlap (columns 0-63, 32-95 and 64-127 of one tensor) are not
// a packed projection: their gradients get buffers of their own, the same bits as for
// copies of them (one shared buffer would have the three overwrite each other).
TEST(FlashAttention, OverlappingViewsAtEqualStepsGetGradientBuffersOfTheirOwn) {
  const Tensor x = normals({1, 2, 37, 128}, 8, DType::bf16).set_requires_grad(true);
  auto piece = [](const Tensor& t, int64_t i) { return t.narrow(3, 32 * i, 64); };
  const std::vector<Tensor> shared = gradients_seen(x, piece, true),
                            apart = gradients_seen(x, piece, false);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(shared[i], apart[i])) << "input " << i;
}

// Nor are pieces of one projection broadcast over the heads (stride 0): each head's
// gradient would land on the same elements, where they must be summed.
TEST(FlashAttention, BroadcastPiecesOfOneProjectionGetGradientBuffersOfTheirOwn) {
  const Tensor x = normals({1, 37, 3 * 64}, 10, DType::bf16).set_requires_grad(true);
  auto piece = [](const Tensor& t, int64_t i) {
    return t.narrow(2, 64 * i, 64).unsqueeze(1).expand({1, 2, 37, 64});
  };
  const std::vector<Tensor> shared = gradients_seen(x, piece, true),
                            apart = gradients_seen(x, piece, false);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(shared[i], apart[i])) << "input " << i;
}

TEST(FlashAttention, TheBackwardsWayToDqIsSetAndParsed) {
  EXPECT_EQ(flash::parse_backward("split"), flash::Backward::split);
  EXPECT_EQ(flash::parse_backward("atomic"), flash::Backward::atomic);
  EXPECT_STREQ(flash::backward_name(flash::Backward::atomic), "atomic");
  EXPECT_TRUE(test::throws_with([] { flash::parse_backward("atomics"); },
                                "'atomics' is not 'split' or 'atomic'"));
  const flash::Backward before = flash::backward();  // split unless ZT_FLASH_BACKWARD says
  {
    test::FlashBackwardScope scope(flash::Backward::atomic);
    EXPECT_EQ(flash::backward(), flash::Backward::atomic);
  }
  EXPECT_EQ(flash::backward(), before);
}

TEST(FlashAttention, TileShapesAreParsedAndAnUnbuiltOneIsRefused) {
  using flash::Pass;
  EXPECT_EQ(flash::parse_tile_shape("32x64"), (flash::TileShape{32, 64}));
  EXPECT_EQ(flash::parse_tile_shape("16x32x3"), (flash::TileShape{16, 32, 3}));
  EXPECT_EQ(flash::parse_tile_shape("16x32x3").str(), "16x32x3");
  EXPECT_EQ(flash::parse_tile_shape("16x32x2").str(), "16x32");
  for (const char* bad :
       {"32", "x64", "32x", "32x64x1", "32x64x3x2", "32x64x", "a x b", "32 64", ""}) {
    EXPECT_TRUE(test::throws_with([&] { flash::parse_tile_shape(bad); },
                                  "is not ROWSxSTEP or ROWSxSTEPxSTAGES (rows per warp x rows "
                                  "per step, then steps in shared memory, 2 or more;"))
        << bad;
  }
  EXPECT_EQ(flash::tile_shapes_str(Pass::forward, 64),
            "16x32, 16x64, 32x32, 32x64, 16x32x3, 16x64x3");
  EXPECT_EQ(flash::tile_shapes_str(Pass::dkdv, 128), "16x16, 16x16x3");
  const Tensor q = normals({1, 1, 20, 128}, 4, DType::bf16);
  test::TileShapeScope shapes({32, 64}, {}, {});
  EXPECT_TRUE(test::throws_with(
      [&] { test::attention_grads(AttentionKernel::flash, q, q, q, false); },
      "flash attention: tile shape 32x64 is not built for head dim 128 (built: 16x16, 16x16x3)"));
}

TEST(FlashAttention, MoreKeysThanQueriesAndFewerLeadingDims) {
  // Tq = 21, Tk = 45 (tails on both sides); one leading dim, then none.
  const Tensor q = normals({3, 21, 64}, 4, DType::bf16), k = normals({3, 45, 64}, 5, DType::bf16),
               v = normals({3, 45, 64}, 6, DType::bf16);
  expect_matches_f32(q, k, v, false);
  expect_matches_f32(q.select(0, 1), k.select(0, 1), v.select(0, 1), false);
  // One query row and three keys: the smallest tiles.
  expect_matches_f32(q.narrow(1, 0, 1), k.narrow(1, 0, 3), v.narrow(1, 0, 3), false);
}

TEST(FlashAttention, RowLogSumExpIsTheScaledScoresOne) {
  const Tensor q = normals({1, 2, 20, 32}, 7, DType::bf16),
               k = normals({1, 2, 20, 32}, 8, DType::bf16),
               v = normals({1, 2, 20, 32}, 9, DType::bf16);
  const double scale = 0.3;
  for (bool causal : {false, true}) {
    SCOPED_TRACE("causal=" + std::to_string(causal));
    Tensor out = Tensor::empty(q.sizes(), DType::bf16), lse = Tensor::empty({1, 2, 20});
    cpu::flash_attention_forward(out, lse, q, k, v, scale, causal);
    const Tensor scores =
        mul(matmul(q.to(DType::f64), k.to(DType::f64).transpose(-2, -1)), scale).contiguous();
    const double* s = scores.data<double>();  // (1, 2, 20, 20)
    std::vector<double> want;
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t i = 0; i < 20; ++i) {
        double mx = -INFINITY, sum = 0;
        const int64_t keys = causal ? i + 1 : 20;
        for (int64_t j = 0; j < keys; ++j) mx = std::max(mx, s[(h * 20 + i) * 20 + j]);
        for (int64_t j = 0; j < keys; ++j) sum += std::exp(s[(h * 20 + i) * 20 + j] - mx);
        want.push_back(mx + std::log(sum));
      }
    }
    EXPECT_TRUE(test::values_are(lse.reshape({40}), want, 1e-5));
  }
}

TEST(FlashAttention, HeadViewsKeepTheirLayoutAndValues) {
  // The heads of a (B, T, H * D) projection: (B, T, H, D) permuted to (B, H, T, D).
  const Tensor q = normals({2, 24, 4, 32}, 10, DType::bf16),
               k = normals({2, 24, 4, 32}, 11, DType::bf16),
               v = normals({2, 24, 4, 32}, 12, DType::bf16);
  auto heads = [](const Tensor& t) { return t.permute({0, 2, 1, 3}); };
  const test::AttentionGrads strided =
      test::attention_grads(AttentionKernel::flash, q, k, v, true, heads);
  const test::AttentionGrads dense =
      test::attention_grads(AttentionKernel::flash, heads(q).contiguous(), heads(k).contiguous(),
                            heads(v).contiguous(), true);
  // The output lies as q does, so merging the heads back is a view; same values.
  EXPECT_TRUE(strided.out.permute({0, 2, 1, 3}).is_contiguous());
  EXPECT_TRUE(same_bits(strided.out.contiguous(), dense.out));
  EXPECT_TRUE(same_bits(heads(strided.dq).contiguous(), dense.dq));
  EXPECT_TRUE(same_bits(heads(strided.dk).contiguous(), dense.dk));
  EXPECT_TRUE(same_bits(heads(strided.dv).contiguous(), dense.dv));
}

TEST(FlashAttention, SameBitsOnOneAndTwoThreadsButTheAtomicDq) {
  // The fused path on `threads` threads, on (1, 2, t, 64) or (2, 2, t, 64) normals.
  auto on_threads = [](int threads, int64_t n0, int64_t t, bool causal) {
    test::ThreadCount count(threads);
    return test::attention_grads(AttentionKernel::flash, normals({n0, 2, t, 64}, 13, DType::bf16),
                                 normals({n0, 2, t, 64}, 14, DType::bf16),
                                 normals({n0, 2, t, 64}, 15, DType::bf16), causal);
  };
  {
    test::FlashBackwardScope split(flash::Backward::split);  // whatever the env says
    const test::AttentionGrads one = on_threads(1, 2, 50, true), two = on_threads(2, 2, 50, true);
    EXPECT_TRUE(same_bits(one.out, two.out));
    EXPECT_TRUE(same_bits(one.dq, two.dq));
    EXPECT_TRUE(same_bits(one.dk, two.dk));
    EXPECT_TRUE(same_bits(one.dv, two.dv));
  }
  // The atomic backward's key tiles add their shares of dq from both threads at once (four
  // tiles over 200 keys): dk and dv keep their bits, dq stays within its rounding.
  test::FlashBackwardScope atomic(flash::Backward::atomic);
  const test::AttentionGrads one = on_threads(1, 1, 200, false), two = on_threads(2, 1, 200, false);
  EXPECT_TRUE(same_bits(one.dk, two.dk));
  EXPECT_TRUE(same_bits(one.dv, two.dv));
  EXPECT_LT(test::relative_error(one.dq, two.dq), test::flash_tolerance(DType::bf16));
}

TEST(FlashAttention, KernelChoiceAndFallbacks) {
  const Tensor q = normals({1, 2, 20, 32}, 16, DType::bf16),
               k = normals({1, 2, 20, 32}, 17, DType::bf16),
               v = normals({1, 2, 20, 32}, 18, DType::bf16);
  const Tensor math = test::attention_grads(AttentionKernel::math, q, k, v, true).out;
  // On the CPU, automatic takes the GEMM path; flash takes the fused one (other roundings).
  Tensor automatic, fused;
  EXPECT_FALSE(test::runs_fused(
      [&] { automatic = test::attention_grads(AttentionKernel::automatic, q, k, v, true).out; }));
  EXPECT_TRUE(same_bits(automatic, math));
  EXPECT_TRUE(test::runs_fused(
      [&] { fused = test::attention_grads(AttentionKernel::flash, q, k, v, true).out; }));
  EXPECT_FALSE(same_bits(fused, math));
  EXPECT_LT(test::relative_error(fused, math), 1.5e-2);
  // What the fused kernels do not take runs the GEMM path under flash too: f32, a head
  // dim they are not built for, a value dim unlike the query dim, a transposed layout.
  auto same_under_both = [](const Tensor& q2, const Tensor& k2, const Tensor& v2,
                            const std::function<Tensor(const Tensor&)>& view) {
    return same_bits(test::attention_grads(AttentionKernel::flash, q2, k2, v2, false, view).out,
                     test::attention_grads(AttentionKernel::math, q2, k2, v2, false, view).out);
  };
  auto as_is = [](const Tensor& t) { return t; };
  auto column_major = [](const Tensor& t) {
    return t.transpose(2, 3).contiguous().transpose(2, 3);
  };
  EXPECT_TRUE(same_under_both(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), as_is));
  EXPECT_TRUE(same_under_both(q.narrow(3, 0, 16), k.narrow(3, 0, 16), v.narrow(3, 0, 16), as_is));
  EXPECT_TRUE(same_under_both(q, k, v.narrow(3, 0, 16), as_is));
  EXPECT_TRUE(same_under_both(q, k, v, column_major));
  // Names.
  for (AttentionKernel kind :
       {AttentionKernel::automatic, AttentionKernel::flash, AttentionKernel::math})
    EXPECT_EQ(parse_attention_kernel(attention_kernel_name(kind)), kind);
  EXPECT_TRUE(test::throws_with([] { parse_attention_kernel("fast"); },
                                "unknown attention kernel 'fast' (expected auto, flash or math)"));
}

TEST(FlashAttention, OutputGradientStartingMidRow) {
  // cat's backward hands the output a gradient view 3 elements (6 bytes) into its
  // buffer: contiguous, but not where the kernels' 16-byte copies may read it.
  const Tensor q = normals({1, 2, 20, 32}, 19, DType::bf16),
               k = normals({1, 2, 20, 32}, 20, DType::bf16),
               v = normals({1, 2, 20, 32}, 21, DType::bf16);
  auto run = [&](AttentionKernel kernel) {
    test::AttentionKernelScope scope(kernel);
    Tensor ql = q.clone(), kl = k.clone(), vl = v.clone();
    for (Tensor* t : {&ql, &kl, &vl}) t->set_requires_grad(true);
    Tensor out = scaled_dot_product_attention(ql, kl, vl, true);
    Tensor y = cat({zeros({3}, DType::bf16), out.reshape({-1})}, 0);
    Generator g(22);
    y.backward(randn(y.sizes(), g, DType::f64).to(DType::bf16));
    return std::vector<Tensor>{ql.grad(), kl.grad(), vl.grad()};
  };
  std::vector<Tensor> fused;
  EXPECT_TRUE(test::runs_fused([&] { fused = run(AttentionKernel::flash); }));
  const std::vector<Tensor> math = run(AttentionKernel::math);
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(test::relative_error(fused[i], math[i]), 1.5e-2) << i;
}

TEST(FlashAttention, KernelsRefuseWhatTheyCannotRun) {
  // The op routes these to the GEMM path; a direct kernel call gets a clear error.
  auto forward = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor out = Tensor::empty(q.sizes(), DType::bf16);
    Tensor lse = Tensor::empty({q.size(0), q.size(1), q.size(2)});
    cpu::flash_attention_forward(out, lse, q, k, v, 0.1, false);
  };
  const Tensor q = normals({1, 1, 4, 32}, 23, DType::bf16);
  EXPECT_TRUE(test::throws_with([&] { forward(q, q.narrow(2, 0, 0), q.narrow(2, 0, 0)); },
                                "at least one query and key"));
  const Tensor odd = normals({1, 1, 4, 48}, 24, DType::bf16);
  EXPECT_TRUE(
      test::throws_with([&] { forward(odd, odd, odd); }, "a head dim of 32, 64, 96 or 128"));
  // A view starting 2 bytes into its storage: not where 16-byte copies may read.
  const Tensor shifted = normals({1, 1, 4, 40}, 25, DType::bf16).narrow(3, 1, 32);
  EXPECT_TRUE(test::throws_with([&] { forward(shifted, q, q); }, "not in the kernels' layout"));
}
