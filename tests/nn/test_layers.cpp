// Layers: forward values derived by hand on tiny inputs, and f64 gradient checks through
// every layer (input and every parameter).
#include <cmath>

#include "common/test_util.h"
#include "nn/nn.h"

using namespace zt;
using zt::test::values_are;

namespace {

void set(const Tensor& t, const std::vector<double>& v) {
  autograd::NoGradGuard ng;
  t.copy_(from_vector(v, t.sizes(), t.dtype()));
}

// Gradient check of module m (converted to f64) w.r.t. its input and all parameters.
void expect_module_grads(nn::Module& m, const Tensor& x) {
  m.to(DType::f64);
  std::vector<Tensor> in{x};
  for (auto& [n, p] : m.named_parameters()) in.push_back(p);
  EXPECT_GRAD_OK([&](const std::vector<Tensor>& v) { return m.call({v[0]})[0]; }, in);
}

Tensor iota(const Shape& s) {
  return arange(1, static_cast<double>(shape_numel(s)) + 1).reshape(s);
}

}  // namespace

TEST(Linear, ForwardByHand) {
  nn::Linear lin(2, 3);
  set(lin.weight, {1, 2, 3, 4, 5, 6});
  set(lin.bias, {0.5, -1, 0});
  // [1,1] -> [3, 7, 11] + b; [0,2] -> [4, 8, 12] + b.
  EXPECT_TRUE(values_are(lin(from_vector({1, 1, 0, 2}, {2, 2})), {3.5, 6, 11, 4.5, 7, 12}));
  EXPECT_EQ(lin(ones({4, 5, 2})).sizes(), (Shape{4, 5, 3}));
  EXPECT_THROW(lin(ones({2, 3})), Error);
  nn::Linear nobias(nn::LinearOptions(2, 3).bias(false));
  EXPECT_FALSE(nobias.bias.defined());
  EXPECT_EQ(nobias.named_parameters().size(), 1u);
}

TEST(Conv2d, ForwardByHand) {
  nn::Conv2d conv(nn::Conv2dOptions(1, 1, 2));
  set(conv.weight, {1, 0, 0, -1});
  set(conv.bias, {0.5});
  // x[i][j] - x[i+1][j+1] = -4 everywhere on the 3x3 ramp 1..9.
  EXPECT_TRUE(values_are(conv(iota({1, 1, 3, 3})), {-3.5, -3.5, -3.5, -3.5}));

  // Symmetric padding 1, stride 2, a 2x2 box filter: windows of the zero-padded 5x5.
  nn::Conv2d box(nn::Conv2dOptions(1, 1, 2).stride(2).padding(1).bias(false));
  set(box.weight, {1, 1, 1, 1});
  EXPECT_TRUE(values_are(box(iota({1, 1, 3, 3})), {1, 5, 11, 28}));
}

TEST(Conv2d, BadOptionsAreNamed) {
  EXPECT_TRUE(test::throws_with(
      [] {
        nn::Conv2d(nn::Conv2dOptions(1, 1, {3, 0}));
      },
      "Conv2d: kernel sizes must be positive, got kernel_size=(3, 0)"));
  EXPECT_TRUE(test::throws_with(
      [] {
        nn::Conv2d(nn::Conv2dOptions(1, 1, 3).stride({1, -2}));
      },
      "Conv2d: strides must be positive, got stride=(1, -2)"));
}

TEST(Conv2d, ExplicitPaddingIsTheTokenizerDownsample) {
  // Pad right and bottom by 1, then 3x3 stride 2 padding 0, on the 4x4 ramp 1..16.
  nn::Conv2d down(nn::Conv2dOptions(1, 1, 3).stride(2).explicit_padding({0, 1, 0, 1}).bias(false));
  set(down.weight, std::vector<double>(9, 1.0));
  Tensor x = iota({1, 1, 4, 4});
  Tensor y = down(x);
  EXPECT_TRUE(values_are(y, {54, 45, 72, 54}));
  // Same as an explicit pad() followed by an unpadded conv.
  Tensor ref =
      conv2d(pad(x, {0, 1, 0, 1}), down.weight, Tensor(), Conv2dArgs{{2, 2}, {0, 0, 0, 0}});
  EXPECT_CLOSE(y, ref);
  EXPECT_NE(down.extra_repr().find("padding=(0, 1, 0, 1)"), std::string::npos) << down.extra_repr();
  EXPECT_THROW(down(ones({1, 2, 4, 4})), Error);
}

TEST(Conv3d, CausalTimePadding) {
  // Kernel (3,1,1) of ones, 2 frames of zeros in front, none behind: a causal running sum.
  nn::Conv3d conv(nn::Conv3dOptions(1, 1, {3, 1, 1}).explicit_padding({2, 0, 0, 0, 0, 0}));
  set(conv.weight, {1, 1, 1});
  set(conv.bias, {0});
  EXPECT_TRUE(values_are(conv(iota({1, 1, 4, 1, 1})), {1, 3, 6, 9}));
  nn::Conv3d same(nn::Conv3dOptions(2, 3, 3).padding(1));
  EXPECT_EQ(same(ones({2, 2, 4, 5, 6})).sizes(), (Shape{2, 3, 4, 5, 6}));
}

TEST(Norms, GroupLayerRmsByHand) {
  // One group over [1, 2, 3, 4]: mean 2.5, var 1.25 -> (x - 2.5) / sqrt(1.25).
  const double a = 1.5 / std::sqrt(1.25), b = 0.5 / std::sqrt(1.25);
  nn::GroupNorm gn(nn::GroupNormOptions(1, 2));
  set(gn.weight, {2, 1});
  set(gn.bias, {0, 1});
  EXPECT_TRUE(values_are(gn(iota({1, 2, 2})), {-2 * a, -2 * b, 1 + b, 1 + a}, 1e-4));
  nn::GroupNorm per_channel(nn::GroupNormOptions(2, 2));  // [1,2] and [3,4] separately
  EXPECT_TRUE(values_are(per_channel(iota({1, 2, 2})), {-1, 1, -1, 1}, 1e-4));
  EXPECT_THROW(nn::GroupNorm(nn::GroupNormOptions(3, 4)), Error);
  // silu(true) and the modulated call m(x, scale, shift): silu(n * scale + shift).
  nn::GroupNorm gs(nn::GroupNormOptions(1, 2).silu(true));
  EXPECT_EQ(gs.extra_repr(), "1, 2, eps=1e-05, affine=true, silu");
  const Tensor n = gn(iota({1, 2, 2})), scale = iota({1, 2, 2}), shift = full({1, 2, 2}, -1.0);
  set(gs.weight, {2, 1});
  set(gs.bias, {0, 1});
  EXPECT_CLOSE(gs(iota({1, 2, 2})), silu(n), 1e-6, 1e-6);
  EXPECT_CLOSE(gs(iota({1, 2, 2}), scale, shift), silu(n * scale + shift), 1e-6, 1e-6);
  EXPECT_TRUE(test::throws_with(
      [&] {
        gs(iota({1, 2, 2}), scale);
      },
      "GroupNorm takes {x} or {x, scale, shift}, got 2 inputs"));

  nn::LayerNorm ln(nn::LayerNormOptions({4}));
  EXPECT_TRUE(values_are(ln(iota({1, 4})), {-a, -b, b, a}, 1e-4));
  EXPECT_THROW(ln(ones({2, 3})), Error);

  // mean(x^2) = 7.5.
  nn::RMSNorm rms(nn::RMSNormOptions({4}));
  const double r = std::sqrt(7.5);
  EXPECT_TRUE(values_are(rms(iota({1, 4})), {1 / r, 2 / r, 3 / r, 4 / r}, 1e-5));
  // The default eps is the machine epsilon of the dtype it normalizes in, f32 for bf16 (as
  // PyTorch's since January 2025): [0.01, 0] in bf16 (0.01 is 0.0100098) is
  // 0.0100098 / sqrt(5.01e-5 + 2^-23) = 1.41254, 1.4140625 in bf16 (bf16's own epsilon,
  // 2^-7, would give 0.112793).
  EXPECT_EQ(rms.extra_repr(), "[4], eps=None, elementwise_affine=true");
  auto rms2 = std::make_shared<nn::RMSNorm>(nn::RMSNormOptions({2}));
  rms2->to(DType::bf16);
  const Tensor small = (*rms2)(from_vector({0.01, 0}, {1, 2}, DType::bf16));
  EXPECT_EQ(small.dtype(), DType::bf16);
  EXPECT_TRUE(values_are(small.to(DType::f32), {1.4140625, 0}, 1e-9));
}

TEST(Embedding, LooksUpRows) {
  nn::Embedding emb(3, 2);
  set(emb.weight, {0, 1, 2, 3, 4, 5});
  EXPECT_TRUE(values_are(emb(from_vector({2, 0}, {2}, DType::i64)), {4, 5, 0, 1}));
  EXPECT_THROW(emb(ones({2})), Error);
}

TEST(Dropout, TrainScalesEvalIsIdentity) {
  manual_seed(3);
  nn::Dropout drop(0.5);
  Tensor x = ones({10000});
  Tensor y = drop(x);
  int zeros_count = 0;
  for (double v : y.to_vector()) {
    EXPECT_TRUE(v == 0.0 || v == 2.0);
    zeros_count += v == 0.0;
  }
  EXPECT_NEAR(zeros_count / 10000.0, 0.5, 0.03);
  drop.eval();
  EXPECT_TRUE(drop(x).same(x));
  // p = 1 drops everything (as PyTorch's); beyond [0, 1] is refused.
  nn::Dropout all(1.0);
  EXPECT_TRUE(values_are(sum(all(x)), {0}));
  EXPECT_TRUE(test::throws_with([] { nn::Dropout(1.5); }, "Dropout: p must be in [0, 1], got 1.5"));
}

TEST(Activations, Values) {
  Tensor x = from_vector({-1, 0, 1}, {3});
  EXPECT_TRUE(values_are(nn::ReLU()(x), {0, 0, 1}));
  EXPECT_TRUE(values_are(nn::SiLU()(x), {-0.2689414, 0, 0.7310586}));
  EXPECT_TRUE(values_are(nn::GELU()(x), {-0.1586553, 0, 0.8413447}));
  EXPECT_TRUE(values_are(nn::Sigmoid()(x), {0.2689414, 0.5, 0.7310586}));
  EXPECT_TRUE(values_are(nn::Tanh()(x), {-0.7615942, 0, 0.7615942}));
  EXPECT_EQ(nn::Flatten()(ones({2, 3, 4})).sizes(), (Shape{2, 12}));
}

TEST(Losses, Values) {
  Tensor x = from_vector({1, 2}, {2}), y = zeros({2});
  EXPECT_NEAR(nn::MSELoss()(x, y).item(), 2.5, 1e-6);
  EXPECT_NEAR(nn::L1Loss()(x, y).item(), 1.5, 1e-6);
  nn::CrossEntropyLoss ce;
  Tensor logits = zeros({2, 2});
  EXPECT_NEAR(ce(logits, from_vector({1, 0}, {2}, DType::i64)).item(), std::log(2.0), 1e-6);
  // The second target is ignored: loss of the first row only, log(1 + e).
  Tensor l2 = from_vector({0, 1, 5, 5}, {2, 2});
  EXPECT_NEAR(nn::CrossEntropyLoss(-1)(l2, from_vector({0, -1}, {2}, DType::i64)).item(),
              std::log(1 + std::exp(1.0)), 1e-5);
  EXPECT_THROW(ce(logits, zeros({2})), Error);
  // Its options as torch.nn.CrossEntropyLoss's: per position, with label smoothing 0.5 the
  // target is [0.75, 0.25], so row 0 of l2 (log-probabilities -log(1 + e) - [1, 0]) gives
  // 0.75 * 1.313262 + 0.25 * 0.313262.
  nn::CrossEntropyLoss smooth({.label_smoothing = 0.5, .reduction = Reduction::kNone});
  EXPECT_TRUE(values_are(smooth(l2, from_vector({0, 1}, {2}, DType::i64)),
                         {0.75 * 1.313262 + 0.25 * 0.313262, 0.693147}));
  EXPECT_EQ(smooth.extra_repr(), "ignore_index=-100, label_smoothing=0.500000, reduction=none");
  EXPECT_THROW(nn::MSELoss()(x, zeros({3})), Error);
}

TEST(Attention, ForwardByHand) {
  // One head, identity projections: scores = x x^T / sqrt(2) on x0 = e0, x1 = e1.
  for (bool causal : {false, true}) {
    nn::MultiheadSelfAttention att(2, 1, causal);
    for (auto& [n, p] : att.named_parameters())
      set(p, n.ends_with("weight") ? std::vector<double>{1, 0, 0, 1} : std::vector<double>{0, 0});
    const double e = std::exp(1 / std::sqrt(2.0)), p = e / (e + 1), q = 1 / (e + 1);
    Tensor y = att(from_vector({1, 0, 0, 1}, {1, 2, 2}));
    if (causal)
      EXPECT_TRUE(values_are(y, {1, 0, q, p}));  // token 0 sees only itself
    else
      EXPECT_TRUE(values_are(y, {p, q, q, p}));
  }
}

TEST(Attention, CausalIgnoresTheFuture) {
  manual_seed(5);
  nn::MultiheadSelfAttention att(nn::MultiheadSelfAttentionOptions(8, 2).causal(true));
  Tensor x = randn({2, 5, 8});
  Tensor y = att(x);
  Tensor x2 = x.clone();
  x2.narrow(1, 3, 2).fill_(7.0);  // change tokens 3 and 4
  Tensor y2 = att(x2);
  EXPECT_CLOSE(y.narrow(1, 0, 3).contiguous(), y2.narrow(1, 0, 3).contiguous());
  EXPECT_GT(max(abs(sub(y, y2))).item(), 1e-3);
  EXPECT_THROW(nn::MultiheadSelfAttention(6, 4), Error);
}

TEST(GradCheck, Linear) {
  manual_seed(1);
  nn::Linear m(3, 2);
  expect_module_grads(m, test::rand_leaf({4, 3}, 1));
}

TEST(GradCheck, Conv2dStridedPadded) {
  manual_seed(2);
  nn::Conv2d m(nn::Conv2dOptions(2, 3, 3).stride(2).explicit_padding({0, 1, 1, 0}));
  expect_module_grads(m, test::rand_leaf({2, 2, 5, 4}, 2));
}

TEST(GradCheck, Conv3dCausal) {
  manual_seed(3);
  nn::Conv3d m(nn::Conv3dOptions(2, 2, {3, 2, 2}).explicit_padding({2, 0, 1, 0, 0, 1}));
  expect_module_grads(m, test::rand_leaf({1, 2, 3, 3, 3}, 3));
}

TEST(GradCheck, Norms) {
  manual_seed(4);
  nn::GroupNorm gn(nn::GroupNormOptions(2, 4));
  expect_module_grads(gn, test::rand_leaf({2, 4, 3}, 4));
  nn::GroupNorm gs(nn::GroupNormOptions(2, 4).silu(true));
  expect_module_grads(gs, test::rand_leaf({2, 4, 3}, 10));
  nn::LayerNorm ln(nn::LayerNormOptions({5}));
  expect_module_grads(ln, test::rand_leaf({3, 5}, 5));
  nn::RMSNorm rms(nn::RMSNormOptions({5}));
  expect_module_grads(rms, test::rand_leaf({3, 5}, 6));
  nn::BatchNorm2d bn(nn::BatchNormOptions(3));
  expect_module_grads(bn, test::rand_leaf({2, 3, 2, 2}, 7));
  nn::BatchNorm3d bn3(nn::BatchNormOptions(2));
  expect_module_grads(bn3, test::rand_leaf({2, 2, 2, 1, 2}, 8));
}

TEST(GradCheck, EmbeddingAndAttention) {
  manual_seed(5);
  nn::Embedding emb(4, 3);
  expect_module_grads(emb, from_vector({1, 3, 1}, {3}, DType::i64));
  nn::MultiheadSelfAttention att(nn::MultiheadSelfAttentionOptions(4, 2).causal(true));
  expect_module_grads(att, test::rand_leaf({1, 3, 4}, 9));
}

TEST(GradCheck, Sequential) {
  manual_seed(6);
  nn::Sequential seq{std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::GELU>(),
                     std::make_shared<nn::Linear>(4, 2), std::make_shared<nn::Tanh>()};
  expect_module_grads(seq, test::rand_leaf({2, 3}, 10));
}
