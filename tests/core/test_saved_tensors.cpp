// What an op's backward keeps alive from forward to backward: an operand only when a
// gradient that reads it is wanted (as PyTorch saves `self` only when `other` needs a
// gradient). Beside a frozen operand (a weight that takes no gradient, dropout's mask),
// the activation is freed as soon as the forward lets go of it, and the gradient that is
// wanted comes out as it does when both operands train.
#include <memory>

#include "common/test_util.h"

using namespace zt;

namespace {

using OpFn = std::function<Tensor(const Tensor& act, const Tensor& other)>;

struct Case {
  const char* name;
  Shape act, other;
  OpFn fn;
  bool other_grad_reads_act = true;  // div's denominator's gradient reads the quotient
};

struct Outcome {
  bool act_kept;  // the activation's storage lived past the forward
  Tensor act_grad;
};

// Runs fn on an activation h = 2 x (a node that saves nothing) and `other`, drops h, and
// back-propagates sum(y * r) for a fixed random r.
Outcome run_case(const Case& c, bool other_trains) {
  Generator gen(7);
  Tensor x = randn(c.act, gen, DType::f64).set_requires_grad();
  Tensor other = randn(c.other, gen, DType::f64);
  if (other_trains) other.set_requires_grad();
  std::weak_ptr<Storage> act_storage;
  Tensor y;
  {
    Tensor h = mul(x, 2.0);
    act_storage = h.storage();
    y = c.fn(h, other);
  }
  Outcome r{.act_kept = !act_storage.expired(), .act_grad = Tensor()};
  Tensor weights = randn(y.sizes(), gen, DType::f64);
  sum(mul(y, weights)).backward();
  r.act_grad = x.grad();
  return r;
}

Conv2dArgs padded(int64_t p) {
  Conv2dArgs a;
  a.padding = {p, p, p, p};
  return a;
}

ConvTranspose2dArgs strided(int64_t s) {
  ConvTranspose2dArgs a;
  a.stride = {s, s};
  return a;
}

std::vector<Case> cases() {
  return {
      {"mul", {6, 5}, {6, 5}, [](const Tensor& h, const Tensor& o) { return mul(h, o); }},
      {"mul, broadcast, activation second",
       {6, 5},
       {5},
       [](const Tensor& h, const Tensor& o) { return mul(o, h); }},
      {"div",
       {6, 5},
       {6, 5},
       [](const Tensor& h, const Tensor& o) { return div(h, add(mul(o, o), 1.0)); },
       false},
      {"matmul 2-D", {4, 6}, {6, 3}, [](const Tensor& h, const Tensor& o) { return matmul(h, o); }},
      {"matmul 2-D, activation second",
       {6, 3},
       {4, 6},
       [](const Tensor& h, const Tensor& o) { return matmul(o, h); }},
      {"bmm", {2, 4, 6}, {2, 6, 3}, [](const Tensor& h, const Tensor& o) { return bmm(h, o); }},
      {"bmm, activation second",
       {2, 6, 3},
       {2, 4, 6},
       [](const Tensor& h, const Tensor& o) { return bmm(o, h); }},
      {"linear", {5, 6}, {3, 6}, [](const Tensor& h, const Tensor& w) { return linear(h, w); }},
      {"linear_gelu",
       {5, 6},
       {3, 6},
       [](const Tensor& h, const Tensor& w) { return linear_gelu(h, w); }},
      {"conv2d",
       {2, 3, 6, 6},
       {4, 3, 3, 3},
       [](const Tensor& h, const Tensor& w) { return conv2d(h, w, Tensor(), padded(1)); }},
      {"conv_transpose2d",
       {2, 3, 5, 5},
       {3, 4, 3, 3},
       [](const Tensor& h, const Tensor& w) {
         return conv_transpose2d(h, w, Tensor(), strided(2));
       }},
  };
}

}  // namespace

TEST(SavedTensors, AnActivationBesideAFrozenOperandIsFreedAfterForward) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Outcome frozen = run_case(c, /*other_trains=*/false);
    const Outcome trains = run_case(c, /*other_trains=*/true);
    EXPECT_FALSE(frozen.act_kept) << "kept for a gradient no one asked for";
    EXPECT_EQ(trains.act_kept, c.other_grad_reads_act);
    ASSERT_TRUE(frozen.act_grad.defined());
    EXPECT_TRUE(test::all_close(frozen.act_grad, trains.act_grad, 1e-12, 1e-12));
  }
}

TEST(SavedTensors, DropoutKeepsItsMaskNotItsInput) {
  Tensor x = full({1000}, 1.0, DType::f64).set_requires_grad();
  std::weak_ptr<Storage> input;
  Tensor y;
  {
    Tensor h = mul(x, 2.0);
    input = h.storage();
    Generator gen(3);
    y = dropout(h, 0.5, /*training=*/true, gen);
  }
  EXPECT_TRUE(input.expired());
  sum(y).backward();
  // Each gradient is 2 x the kept element's scale (2) or 0, and the kept ones are y's nonzeros.
  const Tensor kept = ne(y.detach(), zeros_like(y)).to(DType::f64);
  EXPECT_TRUE(test::all_close(x.grad(), mul(kept, 4.0), 0.0, 0.0));
  EXPECT_GT(sum(kept).item(), 0.0);
  EXPECT_LT(sum(kept).item(), 1000.0);
}
