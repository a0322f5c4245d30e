// Index, reduction-by-index, resizing, dropout and copy-based shape ops on the GPU
// against the CPU. These move or add values without arithmetic of their own, so the
// comparisons are exact (tolerance 0): the GPU's scatter-adds (embedding, gather and
// nearest-resize gradients) add each destination's sources in the CPU's order, embedding's
// and gather's rounding to the dtype after every add as the CPU does, nearest-resize's
// summing in f32 and rounding once as the CPU does, including with repeated indices and in
// bf16. Exceptions, stated where they occur: gradients that go through sum() (repeat,
// repeat_interleave) compare at 1e-6, because sum() accumulates in a different order.
// Without a GPU every test skips and says why.
#include <cmath>
#include <limits>

#include "core/work_counts.h"
#include "cuda/cuda_compare.h"

using namespace zt;
using namespace zt::cuda_test;

TEST(CudaIndex, EmbeddingAndIndexSelectAreExact) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    // 36 ids over 10 rows: most rows repeat, so the backward really accumulates.
    Tensor weight = normal_cpu({10, 16}, 1, dt);
    Tensor ids = ints_cpu({4, 9}, 0, 10, 2);
    Fn emb = [](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); };
    EXPECT_TRUE(
        runs_match(run_on(kGpu, emb, {weight, ids}), run_on(kCpu, emb, {weight, ids}), 0, 0));
    // index_select along a middle dim, i32 indices with repeats.
    Tensor x = normal_cpu({3, 10, 4}, 3, dt);
    Tensor idx = ints_cpu({25}, 0, 10, 4, DType::i32);
    Fn sel = [](const std::vector<Tensor>& in) { return index_select(in[0], 1, in[1]); };
    EXPECT_TRUE(runs_match(run_on(kGpu, sel, {x, idx}), run_on(kCpu, sel, {x, idx}), 0, 0));
    // Last dim (inner = 1) and first dim (outer = 1).
    Fn last = [](const std::vector<Tensor>& in) { return index_select(in[0], 2, in[1]); };
    Tensor idx4 = ints_cpu({9}, 0, 4, 5);
    EXPECT_TRUE(runs_match(run_on(kGpu, last, {x, idx4}), run_on(kCpu, last, {x, idx4}), 0, 0));
  }
  // A large vocabulary with many repeats (the vqgpt embedding shape, scaled down).
  Tensor weight = normal_cpu({4096, 64}, 6);
  Tensor ids = ints_cpu({8, 512}, 0, 300, 7);
  Fn emb = [](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); };
  EXPECT_TRUE(runs_match(run_on(kGpu, emb, {weight, ids}), run_on(kCpu, emb, {weight, ids}), 0, 0));
  // CPU indices are accepted for a GPU input; out-of-range ones are errors, which the
  // kernel reports at the host's next wait (here: the copy of the result to the host).
  Tensor wg = weight.to(kGpu);
  EXPECT_TRUE(zt::test::all_close(index_select(wg, 0, from_vector({3, 1}, {2}, DType::i64)),
                                  index_select(weight, 0, from_vector({3, 1}, {2}, DType::i64)), 0,
                                  0));
  EXPECT_THROW(index_select(wg, 0, from_vector({0, 4096}, {2}, DType::i64)).to(kCpu), zt::Error);
  EXPECT_THROW(index_select(wg, 0, from_vector({-1}, {1}, DType::i64).to(kGpu)).to(kCpu),
               zt::Error);
}

TEST(CudaIndex, GatherAndMaxMinAreExact) {
  ZT_SKIP_WITHOUT_GPU();
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = normal_cpu({4, 6, 5}, 10, dt);
    Fn g1 = [](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); };
    Tensor i1 = ints_cpu({4, 8, 5}, 0, 6, 11);  // longer than x along dim: repeats
    EXPECT_TRUE(runs_match(run_on(kGpu, g1, {x, i1}), run_on(kCpu, g1, {x, i1}), 0, 0));
    Fn g2 = [](const std::vector<Tensor>& in) { return gather(in[0], -1, in[1]); };
    Tensor i2 = ints_cpu({3, 6, 2}, 0, 5, 12, DType::i32);  // smaller than x elsewhere
    EXPECT_TRUE(runs_match(run_on(kGpu, g2, {x, i2}), run_on(kCpu, g2, {x, i2}), 0, 0));
    for (int64_t dim : {0, 1, 2}) {
      Fn mx = [dim](const std::vector<Tensor>& in) { return max(in[0], dim, true); };
      Fn mn = [dim](const std::vector<Tensor>& in) { return min(in[0], dim); };
      EXPECT_TRUE(runs_match(run_on(kGpu, mx, {x}), run_on(kCpu, mx, {x}), 0, 0)) << dim;
      EXPECT_TRUE(runs_match(run_on(kGpu, mn, {x}), run_on(kCpu, mn, {x}), 0, 0)) << dim;
    }
  }
  Tensor x = normal_cpu({4, 6}, 13).to(kGpu);
  // Raised at the next wait on the GPU: the copy of the result to the host.
  EXPECT_THROW(gather(x, 1, full({4, 2}, 6, DType::i64, kGpu)).to(kCpu), zt::Error);
}

TEST(CudaIndex, ArgmaxArgminAreExact) {
  ZT_SKIP_WITHOUT_GPU();
  // Ties (the first index wins) and NaNs (the first NaN wins, as on the CPU and in PyTorch).
  const double nan = NAN;
  Tensor t = from_vector({1, 3, 3, 0, 3, nan, 2, 5, 5, 5, nan, 1, 0, -1, -1, nan, 7, 8}, {3, 6});
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    Tensor a = t.to(dt);
    for (int64_t dim : {0, 1}) {
      EXPECT_TRUE(zt::test::all_close(argmax(a.to(kGpu), dim), argmax(a, dim), 0, 0))
          << dtype_name(dt) << " argmax dim " << dim;
      EXPECT_TRUE(zt::test::all_close(argmin(a.to(kGpu), dim, true), argmin(a, dim, true), 0, 0))
          << dtype_name(dt) << " argmin dim " << dim;
    }
  }
  for (DType dt : {DType::i64, DType::i32}) {
    Tensor a = ints_cpu({5, 7, 3}, -3, 4, 20, dt);  // many ties
    for (int64_t dim : {0, 1, 2}) {
      EXPECT_TRUE(zt::test::all_close(argmax(a.to(kGpu), dim), argmax(a, dim), 0, 0));
      EXPECT_TRUE(zt::test::all_close(argmin(a.to(kGpu), dim), argmin(a, dim), 0, 0));
    }
  }
  // Long rows (one block strides over 100000 elements) and many short rows.
  Tensor longr = normal_cpu({3, 100000}, 21);
  EXPECT_TRUE(zt::test::all_close(argmax(longr.to(kGpu), 1), argmax(longr, 1), 0, 0));
  Tensor shortr = normal_cpu({5000, 3}, 22);
  EXPECT_TRUE(zt::test::all_close(argmin(shortr.to(kGpu), 1), argmin(shortr, 1), 0, 0));
  // Nearest-code search as a VQ layer does it: argmin over |z|^2 + |e|^2 - 2 z.e.
  Tensor z = normal_cpu({64, 8}, 23), e = normal_cpu({512, 8}, 24);
  auto codes = [](const Tensor& zz, const Tensor& ee) {
    Tensor d = add(sub(sum(mul(zz, zz), {1}, true), mul(matmul(zz, ee.transpose(0, 1)), 2.0)),
                   sum(mul(ee, ee), {1}).unsqueeze(0));
    return argmin(d, 1);
  };
  Tensor got = codes(z.to(kGpu), e.to(kGpu));
  EXPECT_EQ(got.device(), kGpu);
  // The distances differ by float rounding between the devices, so a near-tie may pick
  // another code: the GPU's code must be as near as the CPU's (within 1e-4).
  Tensor dist = add(sub(sum(mul(z, z), {1}, true), mul(matmul(z, e.transpose(0, 1)), 2.0)),
                    sum(mul(e, e), {1}).unsqueeze(0));
  Tensor best = min(dist, 1);
  Tensor picked = gather(dist, 1, got.to(kCpu).unsqueeze(1)).squeeze(1);
  EXPECT_TRUE(zt::test::all_close(picked, best, 0, 1e-4));
  EXPECT_TRUE(zt::test::all_close(argmin(dist.to(kGpu), 1), argmin(dist, 1), 0, 0));
}

TEST(CudaIndex, OneHotIsExact) {
  ZT_SKIP_WITHOUT_GPU();
  Tensor ids = ints_cpu({3, 4}, 0, 7, 30);
  Tensor got = one_hot(ids.to(kGpu), 7);
  EXPECT_EQ(got.device(), kGpu);
  EXPECT_TRUE(zt::test::all_close(got, one_hot(ids, 7), 0, 0));
  EXPECT_TRUE(zt::test::all_close(one_hot(ids.to(DType::i32).to(kGpu), 7), one_hot(ids, 7), 0, 0));
  EXPECT_THROW(one_hot(full({2}, 7, DType::i64, kGpu), 7).to(kCpu), zt::Error);  // at the wait
}

TEST(CudaIndex, BincountAndIsFiniteMatchTheCpuWithoutAWait) {
  ZT_SKIP_WITHOUT_GPU();
  // The vqgpt token histogram's shape: many repeats over a 1k vocabulary.
  const Tensor ids = ints_cpu({8, 512}, 0, 1000, 31);
  // The uploads come first: a copy from host memory waits for itself.
  const Tensor gids = ids.to(kGpu), flag = scalar_tensor(1.0, DType::f32, kGpu);
  const Tensor ginf = scalar_tensor(std::numeric_limits<double>::infinity(), DType::f32, kGpu);
  const WorkCounts before = work_counts();
  const Tensor got = bincount(gids, 1000, isfinite(flag).to(DType::f64));
  const Tensor skipped = bincount(gids, 1000, isfinite(ginf).to(DType::f64));
  EXPECT_EQ((work_counts() - before).syncs, 0) << "counting reads nothing back";
  EXPECT_EQ(got.device(), kGpu);
  EXPECT_TRUE(zt::test::all_close(got, bincount(ids, 1000), 0, 0));
  EXPECT_TRUE(zt::test::all_close(skipped, zeros({1000}, DType::f64), 0, 0));
  EXPECT_TRUE(zt::test::all_close(
      bincount(ids.to(DType::i32).to(kGpu), 1000, scalar_tensor(0.5, DType::f64, kGpu)),
      bincount(ids, 1000, scalar_tensor(0.5)), 0, 0));
  // A bad id is the kernel's to report (nothing checks the ids on the host), at the wait.
  EXPECT_TRUE(zt::test::throws_with([&] { (void)bincount(gids, 999).to(kCpu); },
                                    "bincount: index 999 at position"));
  EXPECT_TRUE(zt::test::throws_with(
      [&] {
        (void)bincount(from_vector({2, -1}, {2}, DType::i64).to(kGpu), 5).to(kCpu);
      },
      "bincount: index -1 at position 1 out of range [0, 5)"));
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = from_vector({1.0, -inf, std::nan(""), inf, 0.0}, {5}, DType::f32);
  for (DType dt : {DType::f32, DType::bf16})
    EXPECT_TRUE(zt::test::all_close(isfinite(x.to(dt).to(kGpu)).to(DType::f32),
                                    isfinite(x.to(dt)).to(DType::f32), 0, 0));
}

TEST(CudaShape, InterpolateNearestIsExact) {
  ZT_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x, size;
  };
  const Case cases[] = {
      {{2, 3, 5}, {10}},
      {{2, 3, 5}, {7}},
      {{2, 3, 5}, {3}},
      {{2, 3, 4, 5}, {8, 10}},
      {{2, 3, 4, 5}, {6, 7}},
      {{2, 3, 4, 5}, {3, 2}},
      {{1, 2, 3, 4, 5}, {6, 8, 10}},
      {{1, 2, 3, 4, 5}, {5, 4, 5}},
      {{1, 2, 3, 4, 5}, {2, 3, 7}},
  };
  for (DType dt : {DType::f32, DType::bf16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(c.x) + " -> " + shape_str(c.size));
      Tensor x = normal_cpu(c.x, 40, dt);
      Shape size = c.size;
      Fn fn = [size](const std::vector<Tensor>& in) { return interpolate_nearest(in[0], size); };
      EXPECT_TRUE(runs_match(run_on(kGpu, fn, {x}), run_on(kCpu, fn, {x}), 0, 0));
    }
  }
}

TEST(CudaLoss, DropoutMaskEqualsCpu) {
  ZT_SKIP_WITHOUT_GPU();
  // The mask comes from the same Philox stream positions on both devices.
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor x = normal_cpu({64, 33}, 50, dt);
    Generator gc(77), gg(77);
    Fn on_cpu = [&gc](const std::vector<Tensor>& in) { return dropout(in[0], 0.3, true, gc); };
    Fn on_gpu = [&gg](const std::vector<Tensor>& in) { return dropout(in[0], 0.3, true, gg); };
    EXPECT_TRUE(runs_match(run_on(kGpu, on_gpu, {x}), run_on(kCpu, on_cpu, {x}), 0, 0))
        << dtype_name(dt);
    EXPECT_EQ(gc.offset(), gg.offset());
  }
}

TEST(CudaShape, CopyBasedShapeOpsMatchCpu) {
  ZT_SKIP_WITHOUT_GPU();
  // These are strided copies (Tensor::copy_) on any device; checked here end to end.
  Tensor x = normal_cpu({2, 3, 4, 5}, 60), y = normal_cpu({2, 2, 4, 5}, 61);
  const std::vector<std::pair<std::string, Fn>> exact = {
      {"pad",
       [](const std::vector<Tensor>& in) {
         return pad(in[0], {1, 2, 0, 1}, 0.5);
       }},
      {"pad crop",
       [](const std::vector<Tensor>& in) {
         return pad(in[0], {-1, 2, 1, -1});
       }},
      {"cat",
       [](const std::vector<Tensor>& in) {
         return cat({in[0], in[1]}, 1);
       }},
      {"stack",
       [](const std::vector<Tensor>& in) {
         return stack({in[0], in[0]}, 2);
       }},
      {"chunk", [](const std::vector<Tensor>& in) { return chunk(in[0], 2, 3)[1].contiguous(); }},
  };
  for (const auto& [name, fn] : exact)
    EXPECT_TRUE(runs_match(run_on(kGpu, fn, {x, y}), run_on(kCpu, fn, {x, y}), 0, 0)) << name;
  // Gradients through sum() (another summation order on the GPU): 1e-6.
  const std::vector<std::pair<std::string, Fn>> summed = {
      {"repeat_interleave",
       [](const std::vector<Tensor>& in) { return repeat_interleave(in[0], 3, 2); }},
      {"repeat",
       [](const std::vector<Tensor>& in) {
         return repeat(in[0], {1, 2, 1, 3});
       }},
  };
  for (const auto& [name, fn] : summed)
    EXPECT_TRUE(runs_match(run_on(kGpu, fn, {x}), run_on(kCpu, fn, {x}), 1e-6, 1e-6)) << name;
}
