// The strided-batched GEMM kernel (gemm_batched) against one gemm per matrix, bmm on
// the layouts it reads in place and on ones it must copy, and the fused
// scaled_dot_product_attention against the composed reference (matmul + mask tensor +
// softmax): outputs and gradients, causal and not, f32 and f64, plus central-difference
// gradient checks and its argument errors.
#include "common/attention_cases.h"
#include "common/test_util.h"

using namespace zt;
using test::Layout;

namespace {

// Runs gemm_batched on the CPU and one gemm per matrix on copies of c; both results.
std::pair<Tensor, Tensor> batched_and_looped(bool ta, bool tb, int64_t B, int64_t M, int64_t N,
                                             int64_t K, const Layout& la, const Layout& lb,
                                             DType dt) {
  Tensor a = test::strided_operand(B, M, K, {ta, la.pad, la.step, la.expand}, 1, dt);
  Tensor b = test::strided_operand(B, K, N, {tb, lb.pad, lb.step, lb.expand}, 2, dt);
  // C padded too: ldc = N + 3, every other matrix of the storage; beta = 0.5 reads it.
  Tensor c = test::strided_operand(B, M, N, {false, 3, 2, false}, 3, dt);
  Tensor looped = c.clone();
  auto va = test::blas_view(a, {ta, la.pad, la.step, la.expand});
  auto vb = test::blas_view(b, {tb, lb.pad, lb.step, lb.expand});
  for (int64_t i = 0; i < B; ++i)
    gemm(ta, tb, M, N, K, 1.5, a.select(0, i), va.ld, b.select(0, i), vb.ld, 0.5,
         looped.select(0, i), N);
  cpu::gemm_batched(ta, tb, M, N, K, 1.5, a, va.ld, B > 1 ? va.stride : 0, b, vb.ld,
                    B > 1 ? vb.stride : 0, 0.5, c, c.stride(1), c.stride(0), B);
  return {c.contiguous(), looped};
}

}  // namespace

TEST(GemmBatched, EqualsOneGemmPerMatrix) {
  for (DType dt : {DType::f32, DType::f64}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        // Padded leading dims, gaps between matrices, and a matrix reused over the batch.
        auto [got, want] =
            batched_and_looped(ta, tb, 3, 5, 7, 4, {ta, 2, 2, false}, {tb, 1, 1, true}, dt);
        EXPECT_TRUE(test::all_close(got, want, 0, 0))
            << dtype_name(dt) << " ta=" << ta << " tb=" << tb;
      }
    }
  }
}

TEST(GemmBatched, ManySmallProductsOverThreads) {
  // Products of 32^3: small enough that gemm_batched spreads them over the threads with
  // single-threaded BLAS; the answer must not change. 256 on two threads (two groups of
  // 128), then counts the groups do not divide: 255 on two threads, 256 on three (four
  // groups are worth the work, so as many as there are threads), whose last group
  // ends on the last product.
  struct Case {
    int threads;
    int64_t batch;
  };
  for (const Case c : {Case{2, 256}, Case{2, 255}, Case{3, 256}}) {
    test::ThreadCount threads(c.threads);
    auto [got, want] = batched_and_looped(false, true, c.batch, 32, 32, 32, {false, 0, 1, false},
                                          {true, 0, 1, false}, DType::f32);
    EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-5))
        << c.batch << " products on " << c.threads << " threads";
  }
}

TEST(GemmBatched, BmmReadsViewsInPlaceOrCopies) {
  // Every layout gives the product of the contiguous copies (per matrix via gemm), and bmm
  // allocates nothing but its output unless an operand has no unit stride: then a
  // contiguous copy of it (`copied` bytes).
  auto check = [](const Tensor& a, const Tensor& b, int64_t copied, const char* what) {
    Tensor want = Tensor::empty({a.size(0), a.size(1), b.size(2)}, a.dtype());
    for (int64_t i = 0; i < a.size(0); ++i)
      gemm(false, false, a.size(1), b.size(2), a.size(2), 1.0, a.select(0, i).contiguous(),
           a.size(2), b.select(0, i).contiguous(), b.size(2), 0.0, want.select(0, i), b.size(2));
    const int64_t before = memory_stats().total_current;
    reset_peak_memory();
    const Tensor got = bmm(a, b);
    const int64_t extra = memory_stats().total_peak - before -
                          got.numel() * static_cast<int64_t>(dtype_size(got.dtype()));
    EXPECT_TRUE(test::all_close(got, want, 1e-6, 1e-6)) << what;
    EXPECT_EQ(extra, copied) << what << ": bytes allocated besides the output";
  };
  const DType dt = DType::f64;
  check(test::strided_operand(4, 3, 5, {true, 1, 2, false}, 4, dt),
        test::strided_operand(4, 5, 2, {false, 2, 1, true}, 5, dt), 0,
        "transposed, padded, expanded");
  // Every other column: no unit stride, so bmm copies the operand first.
  Tensor wide = test::strided_operand(4, 3, 10, {}, 6, dt);
  check(wide.slice(2, 0, 10, 2), test::strided_operand(4, 5, 2, {}, 7, dt), 4 * 3 * 5 * 8,
        "column step 2");
  // Empty inner dim: zeros.
  EXPECT_TRUE(test::values_are(bmm(zeros({2, 1, 0}), zeros({2, 0, 2})), {0, 0, 0, 0}));
}

namespace {

struct AttnRun {
  Tensor out, dq, dk, dv;
};

// Output and input gradients of fn(q, k, v) for a fixed upstream gradient.
template <typename Fn>
AttnRun run_attention(const Tensor& q0, const Tensor& k0, const Tensor& v0, Fn&& fn) {
  Tensor q = q0.detach().clone(), k = k0.detach().clone(), v = v0.detach().clone();
  for (const Tensor& t : {q, k, v}) t.set_requires_grad(true);
  Tensor out = fn(q, k, v);
  Generator g(77);
  out.backward(randn(out.sizes(), g, DType::f64).to(out.dtype()));
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

::testing::AssertionResult same_runs(const AttnRun& a, const AttnRun& b, double tol) {
  const std::vector<std::pair<const char*, std::pair<Tensor, Tensor>>> parts = {
      {"out", {a.out, b.out}}, {"dq", {a.dq, b.dq}}, {"dk", {a.dk, b.dk}}, {"dv", {a.dv, b.dv}}};
  for (const auto& [name, t] : parts) {
    auto r = test::all_close(t.first, t.second, tol, tol);
    if (!r) return ::testing::AssertionFailure() << name << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST(Attention, MatchesComposedReference) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 2e-5 : 1e-12;
    for (bool causal : {false, true}) {
      // (B, H, T, D) with a value dim unlike D and a non-default scale.
      Generator g(11);
      Tensor q = randn({2, 3, 6, 4}, g, DType::f64).to(dt);
      Tensor k = randn({2, 3, 6, 4}, g, DType::f64).to(dt);
      Tensor v = randn({2, 3, 6, 5}, g, DType::f64).to(dt);
      for (double scale : {0.5, 1.0 / std::sqrt(4.0)}) {
        AttnRun fused = run_attention(q, k, v, [&](auto& a, auto& b, auto& c) {
          return scaled_dot_product_attention(a, b, c, causal, scale);
        });
        AttnRun ref = run_attention(q, k, v, [&](auto& a, auto& b, auto& c) {
          return test::reference_attention(a, b, c, causal, scale);
        });
        EXPECT_TRUE(same_runs(fused, ref, tol))
            << dtype_name(dt) << " causal=" << causal << " scale=" << scale;
      }
      // The default scale is 1 / sqrt(D).
      EXPECT_TRUE(test::all_close(scaled_dot_product_attention(q, k, v, causal),
                                  test::reference_attention(q, k, v, causal, 0.5), tol, tol));
    }
  }
}

TEST(Attention, CausalQueriesIgnoreLaterKeys) {
  // Changing the last key and value must not change any output but the last query's.
  Generator g(12);
  Tensor q = randn({1, 5, 3}, g, DType::f64), k = randn({1, 5, 3}, g, DType::f64);
  Tensor v = randn({1, 5, 2}, g, DType::f64);
  Tensor k2 = k.clone(), v2 = v.clone();
  k2.narrow(1, 4, 1).fill_(7.0);
  v2.narrow(1, 4, 1).fill_(-3.0);
  Tensor a = scaled_dot_product_attention(q, k, v, true);
  Tensor b = scaled_dot_product_attention(q, k2, v2, true);
  EXPECT_TRUE(test::all_close(a.narrow(1, 0, 4), b.narrow(1, 0, 4), 0, 0));
  EXPECT_FALSE(test::all_close(a.narrow(1, 4, 1), b.narrow(1, 4, 1)));
  // The first query sees only the first key: its output is the first value.
  EXPECT_TRUE(test::all_close(a.narrow(1, 0, 1), v.narrow(1, 0, 1), 1e-15, 1e-15));
}

TEST(Attention, StridedInputsAndMoreKeysThanQueries) {
  // The tokenizer's layout: (N, HW, C) transposed views of (N, C, HW) maps; 3 queries
  // over 7 keys (not causal).
  Generator g(13);
  Tensor qm = randn({2, 4, 3}, g, DType::f64), km = randn({2, 4, 7}, g, DType::f64);
  Tensor vm = randn({2, 5, 7}, g, DType::f64);
  auto fused = run_attention(qm, km, vm, [](auto& a, auto& b, auto& c) {
    return scaled_dot_product_attention(a.transpose(1, 2), b.transpose(1, 2), c.transpose(1, 2));
  });
  auto ref = run_attention(qm, km, vm, [](auto& a, auto& b, auto& c) {
    return test::reference_attention(a.transpose(1, 2), b.transpose(1, 2), c.transpose(1, 2), false,
                                     0.5);
  });
  EXPECT_TRUE(same_runs(fused, ref, 1e-12));
}

TEST(Attention, GemmPathKeepsTransposedLayouts) {
  // The tokens of (N, C, HW) maps: the output and the gradients the op hands each
  // transposed input are transposed too, so the maps' convolutions read them in place.
  Generator g(14);
  Tensor qm = randn({2, 4, 3}, g, DType::f64), km = randn({2, 4, 7}, g, DType::f64);
  Tensor vm = randn({2, 5, 7}, g, DType::f64);
  std::vector<Tensor> seen(3);  // the gradient each view receives
  std::vector<Tensor> views;
  for (Tensor* m : {&qm, &km, &vm}) {
    m->set_requires_grad(true);
    Tensor view = m->transpose(1, 2);
    const size_t i = views.size();
    view.register_hook([&seen, i](const Tensor& grad) {
      seen[i] = grad;
      return Tensor();
    });
    views.push_back(view);
  }
  Tensor out = scaled_dot_product_attention(views[0], views[1], views[2]);
  EXPECT_EQ(out.sizes(), (Shape{2, 3, 5}));
  EXPECT_TRUE(out.transpose(1, 2).is_contiguous()) << "strides " << shape_str(out.strides());
  out.backward(randn(out.sizes(), g, DType::f64));
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(seen[i].defined()) << "input " << i;
    EXPECT_TRUE(seen[i].transpose(1, 2).is_contiguous())
        << "input " << i << ": strides " << shape_str(seen[i].strides());
  }
  // Contiguous inputs keep contiguous results.
  Tensor plain = scaled_dot_product_attention(qm.detach().transpose(1, 2).contiguous(),
                                              km.detach().transpose(1, 2).contiguous(),
                                              vm.detach().transpose(1, 2).contiguous());
  EXPECT_TRUE(plain.is_contiguous());
  EXPECT_TRUE(test::all_close(plain, out.detach(), 1e-14, 1e-14));
}

TEST(Attention, GradientsMatchFiniteDifferences) {
  for (bool causal : {false, true}) {
    Tensor q = test::rand_leaf({2, 4, 3}, 21), k = test::rand_leaf({2, 4, 3}, 22);
    Tensor v = test::rand_leaf({2, 4, 2}, 23);
    EXPECT_GRAD_OK(
        [causal](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], causal); },
        {q, k, v})
        << "causal=" << causal;
  }
}

TEST(Attention, KernelWorksInPlaceAndMasksRows) {
  // attention_softmax_forward with y == x equals the out-of-place call; causal rows
  // r % L keep keys 0..r % L only.
  Generator g(31);
  Tensor x = randn({6, 3}, g, DType::f32);
  Tensor y = Tensor::empty({6, 3});
  cpu::attention_softmax_forward(y, x, 6, 3, 0.7, true);
  Tensor x2 = x.clone();
  cpu::attention_softmax_forward(x2, x2, 6, 3, 0.7, true);
  EXPECT_TRUE(test::all_close(x2, y, 0, 0));
  std::vector<double> got = y.to_vector();
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t l = r % 3 + 1; l < 3; ++l) EXPECT_EQ(got[static_cast<size_t>(r * 3 + l)], 0.0);
  EXPECT_TRUE(test::all_close(sum(y, {1}), ones({6}), 1e-6, 1e-6));
}

TEST(Attention, RejectsBadShapes) {
  Tensor q = zeros({2, 4, 3}), k = zeros({2, 5, 3}), v = zeros({2, 5, 2});
  EXPECT_TRUE(test::throws_with([&] { scaled_dot_product_attention(q, k, v, true); },
                                "as many queries as keys"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        scaled_dot_product_attention(q, zeros({3, 5, 3}), v);
      },
      "leading dims"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        scaled_dot_product_attention(q, zeros({2, 5, 4}), v);
      },
      "must be (..., Tk, 3)"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        scaled_dot_product_attention(q, k, zeros({2, 5, 2}, DType::f64));
      },
      "dtype"));
}
