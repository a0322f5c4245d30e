// Indexing and views: index_select, embedding, gather and one_hot; reshape, permute,
// transpose, narrow, slice, select, expand, squeeze, unsqueeze, flatten, clone and
// dtype conversion. Values worked out by hand, storage sharing, and gradient checks.
#include <cmath>
#include <limits>

#include "common/test_util.h"

using namespace zt;
using zt::test::values_are;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
// x = [[0, 1, 2], [3, 4, 5]].
Tensor x23() {
  return arange(0, 6).reshape({2, 3});
}
}  // namespace

TEST(Index, IndexSelectAndEmbedding) {
  Tensor x = x23();
  Tensor idx = from_vector({2, 0, 2}, {3}, DType::i64);
  // Columns 2, 0, 2: [[2, 0, 2], [5, 3, 5]].
  EXPECT_TRUE(values_are(index_select(x, 1, idx), {2, 0, 2, 5, 3, 5}));
  // Rows 1, 1: [[3, 4, 5], [3, 4, 5]] (i32 indices work too).
  EXPECT_TRUE(
      values_are(index_select(x, 0, from_vector({1, 1}, {2}, DType::i32)), {3, 4, 5, 3, 4, 5}));
  // embedding: ids (2, 2) -> (2, 2, 3) rows of x.
  Tensor ids = from_vector({1, 0, 0, 1}, {2, 2}, DType::i64);
  Tensor e = embedding(x, ids);
  EXPECT_EQ(e.sizes(), (Shape{2, 2, 3}));
  EXPECT_TRUE(values_are(e, {3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5}));
}

TEST(Index, GatherAndOneHot) {
  Tensor x = x23();
  // out[i][j] = x[i][index[i][j]]: row 0 picks [2, 2], row 1 picks [0, 1].
  Tensor idx = from_vector({2, 2, 0, 1}, {2, 2}, DType::i64);
  EXPECT_TRUE(values_are(gather(x, 1, idx), {2, 2, 3, 4}));
  // Along dim 0: out[i][j] = x[index[i][j]][j] with index [[1, 0, 1]] -> [3, 1, 5].
  EXPECT_TRUE(values_are(gather(x, 0, from_vector({1, 0, 1}, {1, 3}, DType::i64)), {3, 1, 5}));
  Tensor oh = one_hot(from_vector({2, 0}, {2}, DType::i64), 3);
  EXPECT_EQ(oh.sizes(), (Shape{2, 3}));
  EXPECT_TRUE(values_are(oh, {0, 0, 1, 1, 0, 0}));
}

TEST(Index, GradientsScatterAdd) {
  // Repeated indices accumulate: index_select rows [0, 0, 1] of a (2, 2) leaf with
  // upstream ones gives grad [[2, 2], [1, 1]].
  Tensor w = zeros({2, 2}, DType::f64).set_requires_grad(true);
  sum(index_select(w, 0, from_vector({0, 0, 1}, {3}, DType::i64))).backward();
  EXPECT_TRUE(values_are(w.grad(), {2, 2, 1, 1}));

  Tensor x = test::rand_leaf({3, 4}, 1);
  Tensor idx = from_vector({3, 1, 1}, {3}, DType::i64);
  EXPECT_GRAD_OK([&](auto& in) { return index_select(in[0], 1, idx); }, {x});
  EXPECT_GRAD_OK([&](auto& in) { return index_select(in[0], 0, idx.slice(0, 1, 3)); }, {x});
  Tensor ids = from_vector({2, 0, 2, 1}, {2, 2}, DType::i64);
  EXPECT_GRAD_OK([&](auto& in) { return embedding(in[0], ids); }, {x});
  Tensor gi = from_vector({0, 3, 3, 1, 2, 2}, {3, 2}, DType::i64);
  EXPECT_GRAD_OK([&](auto& in) { return gather(in[0], 1, gi); }, {x});
}

TEST(Views, ValuesAndSharing) {
  Tensor x = x23();
  EXPECT_TRUE(values_are(x.transpose(0, 1), {0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(values_are(x.permute({1, 0}), {0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(values_are(x.narrow(1, 1, 2), {1, 2, 4, 5}));
  EXPECT_TRUE(values_are(x.slice(1, 0, 3, 2), {0, 2, 3, 5}));
  EXPECT_TRUE(values_are(x.slice(1, -2, 100), {1, 2, 4, 5}));  // clamped like Python
  EXPECT_TRUE(values_are(x.select(0, 1), {3, 4, 5}));
  EXPECT_TRUE(values_are(x.select(1, -1), {2, 5}));
  EXPECT_TRUE(values_are(x.reshape({3, 2}), {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(values_are(x.view({-1}), {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(values_are(x.select(0, 0).unsqueeze(0).expand({2, 3}), {0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(x.unsqueeze(1).sizes(), (Shape{2, 1, 3}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).sizes(), (Shape{2, 3}));
  EXPECT_EQ(x.squeeze(0).sizes(), (Shape{2, 3}));  // size 2: unchanged
  EXPECT_EQ(zeros({2, 3, 4}).flatten(1).sizes(), (Shape{2, 12}));
  // Views share storage; clone and contiguous copies do not.
  Tensor v = x.narrow(1, 1, 1);
  Tensor c = x.clone();
  v.fill_(9);
  EXPECT_TRUE(values_are(x, {0, 9, 2, 3, 9, 5}));
  EXPECT_TRUE(values_are(c, {0, 1, 2, 3, 4, 5}));
  Tensor t = x.transpose(0, 1);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(t.contiguous().is_contiguous());
  // reshape of a non-viewable layout copies.
  EXPECT_TRUE(values_are(t.reshape({6}), {0, 3, 9, 9, 2, 5}));
}

TEST(Views, DtypeConversion) {
  Tensor x = from_vector({1.5, -2.25}, {2}, DType::f64);
  Tensor f = x.to(DType::f32);
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_TRUE(values_are(f, {1.5, -2.25}));
  EXPECT_TRUE(values_are(x.to(DType::i64), {1, -2}));  // truncation toward zero
  // Gradient of a dtype round trip comes back in the input's dtype.
  Tensor leaf = test::rand_leaf({3}, 2);
  sum(mul(leaf.to(DType::f32), 2.0)).backward();
  EXPECT_EQ(leaf.grad().dtype(), DType::f64);
  EXPECT_TRUE(values_are(leaf.grad(), {2, 2, 2}));
  // f32 rounding limits the finite-difference accuracy: larger step, looser tolerance.
  EXPECT_GRAD_OK([](auto& in) { return mul(in[0].to(DType::f32), 3.0).to(DType::f64); }, {leaf},
                 1e-2, 1e-3);
}

TEST(Views, Gradients) {
  Tensor x = test::rand_leaf({2, 3, 4}, 3);
  std::vector<std::pair<const char*, Fn>> fns = {
      {"reshape",
       [](auto& in) {
         return in[0].reshape({4, 6});
       }},
      {"view",
       [](auto& in) {
         return in[0].view({6, -1});
       }},
      {"reshape_copy", [](auto& in) { return in[0].transpose(0, 2).reshape({-1}); }},
      {"permute",
       [](auto& in) {
         return in[0].permute({2, 0, 1});
       }},
      {"transpose", [](auto& in) { return in[0].transpose(1, 2); }},
      {"narrow", [](auto& in) { return in[0].narrow(2, 1, 2); }},
      {"slice_step", [](auto& in) { return in[0].slice(2, 0, 4, 3); }},
      {"select", [](auto& in) { return in[0].select(1, -1); }},
      {"expand",
       [](auto& in) {
         return in[0].unsqueeze(0).expand({3, 2, 3, 4});
       }},
      {"expand_size1",
       [](auto& in) {
         return in[0].narrow(1, 0, 1).expand({2, 5, 4});
       }},
      {"squeeze", [](auto& in) { return in[0].narrow(0, 1, 1).squeeze(0); }},
      {"unsqueeze", [](auto& in) { return in[0].unsqueeze(-1); }},
      {"flatten", [](auto& in) { return in[0].flatten(0, 1); }},
      {"contiguous", [](auto& in) { return in[0].transpose(0, 1).contiguous(); }},
      {"clone", [](auto& in) { return in[0].clone(); }},
      {"chain",
       [](auto& in) {
         return in[0].permute({1, 2, 0}).slice(0, 1, 3).select(2, 0);
       }},
  };
  for (auto& [name, fn] : fns) {
    SCOPED_TRACE(name);
    EXPECT_GRAD_OK(fn, {x});
  }
}

TEST(Index, BincountCountsIdsWeightedOrNot) {
  const Tensor ids = from_vector({2, 0, 2, 3, 2, 0}, {2, 3}, DType::i64);
  Tensor c = bincount(ids, 5);
  EXPECT_EQ(c.dtype(), DType::f64);
  EXPECT_TRUE(values_are(c, {2, 0, 3, 1, 0}));
  // i32 ids; a weight (a 0/1 flag, or any value) scales every id's count.
  const Tensor ids32 = ids.to(DType::i32);
  EXPECT_TRUE(values_are(bincount(ids32, 4, scalar_tensor(0.5)), {1, 0, 1.5, 0.5}));
  EXPECT_TRUE(values_are(bincount(ids32, 4, scalar_tensor(0.0, DType::f32)), {0, 0, 0, 0}));
  EXPECT_TRUE(values_are(bincount(Tensor::empty({0}, DType::i64), 3), {0, 0, 0}));
  EXPECT_TRUE(test::throws_with([&] { (void)bincount(ids, 3); }, "id 3 out of range [0, 3)"));
  EXPECT_TRUE(test::throws_with([&] { (void)bincount(ids, 5, ones({2})); },
                                "the weight must be one floating element"));
  EXPECT_TRUE(test::throws_with([&] { (void)bincount(ids.to(DType::f32), 5); },
                                "indices must be i64 or i32"));
}

TEST(Index, IsFiniteTellsNaNAndInfinitiesApart) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = from_vector({1.0, -inf, 3e38, std::nan(""), inf, -0.0}, {6}, DType::f64);
  for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor f = isfinite(x.to(dt));  // 3e38 is inf in f16: the conversion overflows
    EXPECT_EQ(f.dtype(), DType::b8);
    EXPECT_TRUE(values_are(f.to(DType::f32), {1, 0, dt == DType::f16 ? 0.0 : 1.0, 0, 0, 1}));
  }
  EXPECT_TRUE(values_are(isfinite(from_vector({1, 2}, {2}, DType::i64)).to(DType::f32), {1, 1}));
}
