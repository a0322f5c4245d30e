// One-dimensional layers and the Embedding padding row, against torch.nn: BatchNorm1d
// on (N, C) and (N, C, L) (outputs, running statistics, eval, the synchronized path),
// Conv1d (PyTorch's weight shape and state dict, strides, padding, dilation, groups,
// refused options), and Embedding's padding_idx (a zero row that learns nothing).
#include <cmath>
#include <string>

#include "common/test_util.h"
#include "core/conv_reference.h"
#include "nn/conv.h"
#include "nn/embedding.h"
#include "nn/nn_test_util.h"
#include "nn/norm.h"
#include "nn/state_dict.h"

using namespace zt;
using zt::nn_test::keys;
using zt::nn_test::seq;
using zt::test::values_are;

namespace {

// BatchNorm1d(3, momentum=0.2) in f64 with weight [1, 0.5, 2] and bias [0, 0.1, -0.3].
std::shared_ptr<nn::BatchNorm1d> make_bn() {
  auto bn = std::make_shared<nn::BatchNorm1d>(nn::BatchNormOptions(3).momentum(0.2));
  bn->to(DType::f64);
  autograd::NoGradGuard ng;
  bn->weight.copy_(from_vector({1.0, 0.5, 2.0}, {3}, DType::f64));
  bn->bias.copy_(from_vector({0.0, 0.1, -0.3}, {3}, DType::f64));
  return bn;
}

struct BnCase {
  Shape shape;
  std::vector<double> train_out, running_mean, running_var, eval_out;
};

// torch.nn.BatchNorm1d(3, momentum=0.2) (weights as make_bn) on seq(shape, 0.9, 0.2) * 2
// + 1 in training, then in eval on seq(shape, 0.4, 0.3).
std::vector<BnCase> bn_cases() {
  return {
      {{4, 3},
       {0.03945839335827128, 0.7679165985699633, 1.6887447858687397, 0.11406092675321564,
        -0.6423489432251633, -2.708194319166397, -1.4863012968960605, 0.1335710681279287,
        1.6643575350849253, 1.3327819767845734, 0.14086127652727137, -1.8449080017872683},
       {0.27088238558930167, 0.27173593713067795, 0.2183011616180326},
       {1.1156036041522548, 1.102913611604973, 1.6044492202986413},
       {0.02332627525738603, 0.27733819605858057, 0.7624785788811408, 0.6879328122076258,
        0.42115933076225115, 0.5327394032481668, 0.14816665915772115, -0.009576700647684396,
        -1.1985501613950311, -0.9076167801158702, -0.46555891757915124, -2.223503383748071}},
      {{2, 3, 5},
       {-0.0013334888083421429, 1.0019677272178387,   1.0281753652327354,  0.0574560072763324,
        -1.1755692893365626,    -0.7724667373920412,  -0.5048150217458395, 0.10967776215596454,
        0.605975726317269,      0.6084904659256724,   1.356927374121952,   -1.4112759284893546,
        -2.6352167613725936,    -1.3886411033487274,  1.3850674399969012,  1.0233327150110987,
        1.0071597063799764,     0.009963933417770795, -1.2135967235324592, -1.737555952858389,
        -0.48562356909682686,   0.13342890783804415,  0.6163121714959131,  0.5975897949626509,
        0.09143049953919433,    -1.495800342616722,   -2.6328851780583427, -1.301218018361377,
        1.491421978852872,      3.631620539275392},
       {0.2798359135567698, 0.28071603452045624, 0.08613488439598627},
       {1.223515954043553, 1.2215889381704366, 1.1336260243992113},
       {0.014179416405254705, 0.32942006790230755, 0.5527115733221538,  0.648801113693909,
        0.6025182634102415,   0.3103529108450525,  0.1663481395783023,  -0.008180628758064577,
        -0.18567913918330112, -0.3381242797395339, -2.1827439583530337, -2.3400755562174327,
        -2.2008683747557125,  -1.7871001670323707, -1.1640958351091824, -0.23778557453861723,
        0.11301916195855141,  0.4060396972026638,  0.595014531615894,   0.6501086940241431,
        0.3811356534999473,   0.2729246103565717,  0.1173634888117448,  -0.0609880305214431,
        -0.2339721643345179,  -1.903835614549953,  -2.258761969473383,  -2.3299871724939645,
        -2.106266330154923,   -1.622920044286421}},
  };
}

}  // namespace

TEST(BatchNorm1d, MatchesPyTorchOnBothInputForms) {
  for (const BnCase& c : bn_cases()) {
    auto bn = make_bn();
    const Tensor x = add(mul(seq(c.shape, 0.9, 0.2), 2.0), 1.0);
    EXPECT_TRUE(values_are((*bn)(x), c.train_out, 1e-12)) << shape_str(c.shape);
    EXPECT_TRUE(values_are(bn->running_mean, c.running_mean, 1e-12));
    EXPECT_TRUE(values_are(bn->running_var, c.running_var, 1e-12));
    EXPECT_EQ(bn->num_batches_tracked.item(), 1.0);
    bn->eval();
    EXPECT_TRUE(values_are((*bn)(seq(c.shape, 0.4, 0.3)), c.eval_out, 1e-12));
  }
}

TEST(BatchNorm1d, StateDictAndPrintedFormAsPyTorch) {
  nn::BatchNorm1d bn(nn::BatchNormOptions(3));
  EXPECT_EQ(keys(nn::state_dict(bn)),
            std::vector<std::string>(
                {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn.type_name(), "BatchNorm1d");
  EXPECT_EQ(bn.extra_repr(), "3, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true");
}

TEST(BatchNorm1d, GradientsByFiniteDifferences) {
  for (const Shape& s : {Shape{4, 3}, Shape{2, 3, 5}}) {
    auto bn = make_bn();
    EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return (*bn)(in[0]); },
                   {test::rand_leaf(s, 41), bn->weight, bn->bias})
        << shape_str(s);
  }
}

TEST(BatchNorm1d, SynchronizedPathEqualsThePlainOne) {
  // A stats reducer that returns the local sums is the single-rank synchronized BatchNorm:
  // it must give the plain layer's output, gradient and running statistics on (N, C).
  auto plain = make_bn(), synced = make_bn();
  int calls = 0;
  synced->stats_reducer = [&](const nn::BatchNormStats& s) {
    ++calls;
    return s;
  };
  Tensor xa = test::rand_leaf({6, 3}, 42), xb = xa.detach().clone().set_requires_grad(true);
  const Tensor w = seq({6, 3}, 0.3, 0.1);
  sum(mul((*plain)(xa), w)).backward();
  sum(mul((*synced)(xb), w)).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_CLOSE(xa.grad(), xb.grad(), 1e-9, 1e-10);
  EXPECT_CLOSE(plain->running_var, synced->running_var, 1e-12, 1e-12);
  EXPECT_CLOSE(plain->weight.grad(), synced->weight.grad(), 1e-9, 1e-10);
}

TEST(BatchNorm1d, RefusesOtherRanksAndSingleValues) {
  nn::BatchNorm1d bn(nn::BatchNormOptions(3));
  EXPECT_TRUE(test::throws_with(
      [&] {
        bn(zeros({2, 3, 4, 4}));
      },
      "BatchNorm1d: expected a 2-D or 3-D input (N, C) or (N, C, L), got [2, 3, 4, 4]"));
  EXPECT_TRUE(test::throws_with([&] { bn(zeros({3})); }, "BatchNorm1d: expected a 2-D or 3-D"));
  EXPECT_TRUE(test::throws_with([&] { bn(zeros({2, 4})); }, "has 4 channels, expected 3"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        bn(zeros({1, 3}));
      },
      "expected more than 1 value per channel when training"));
  bn.eval();
  EXPECT_EQ(bn(zeros({1, 3})).sizes(), Shape({1, 3}));  // eval needs no batch statistics
}

TEST(Conv1d, MatchesPyTorchStridedAndPadded) {
  // torch.nn.Conv1d(2, 3, 3, stride=2, padding=1) with weight seq((3, 2, 3), 0.5, 0.1) and
  // bias [0.1, -0.2, 0.3] on seq((2, 2, 7), 0.3, 0.5); and Conv1d(2, 1, 2, bias=False).
  nn::Conv1d conv(nn::Conv1dOptions(2, 3, 3).stride(2).padding(1));
  EXPECT_EQ(conv.weight.sizes(), Shape({3, 2, 3}));
  conv.to(DType::f64);
  {
    autograd::NoGradGuard ng;
    conv.weight.copy_(seq({3, 2, 3}, 0.5, 0.1));
    conv.bias.copy_(from_vector({0.1, -0.2, 0.3}, {3}, DType::f64));
  }
  const Tensor x = seq({2, 2, 7}, 0.3, 0.5);
  const Tensor y = conv(x);
  EXPECT_EQ(y.sizes(), Shape({2, 3, 4}));
  EXPECT_TRUE(values_are(
      y, {1.5783360200145837,  1.560998661501063,   0.268071353511285,    -1.0275249194017604,
          -1.6274405299942432, -1.3331788109821139, 0.089674626788115,    1.2019411637808934,
          1.647974808060744,   1.0826783788567511,  -0.44162276746282136, -1.3482975462350013,
          -0.516891699588202,  0.9855778287043699,  2.0586629679418147,   1.7488963873352237,
          0.1095210381074298,  -1.5352310743229267, -2.460217516183257,   -1.8750455557064065,
          0.3040446890555294,  2.058159660910528,   2.816533795470826,    1.967668675891308},
      1e-12));
  nn::Conv1d nobias(nn::Conv1dOptions(2, 1, 2).bias(false));
  nobias.to(DType::f64);
  {
    autograd::NoGradGuard ng;
    nobias.weight.copy_(seq({1, 2, 2}, 0.5, 0.1));
  }
  EXPECT_TRUE(
      values_are(nobias(x),
                 {1.151478337733843, 0.7297011478147558, 0.2427419275947042, -0.2659007060709424,
                  -0.7507912215823713, -1.1686157933147132, 0.5277405357520921, 0.9823212294814323,
                  1.3491540933805886, 1.5954710402378707, 1.6992693107842634, 1.6512769146491821},
                 1e-12));
  // f32 agrees to f32 rounding.
  conv.to(DType::f32);
  EXPECT_CLOSE(conv(x.to(DType::f32)).to(DType::f64), y, 1e-5, 1e-5);
}

TEST(Conv1d, StateDictOptionsAndPrintedForm) {
  nn::Conv1d conv(nn::Conv1dOptions(2, 3, 3).stride(2).padding(1));
  EXPECT_EQ(keys(nn::state_dict(conv)), std::vector<std::string>({"weight", "bias"}));
  EXPECT_EQ(conv.extra_repr(), "2, 3, kernel_size=(3), stride=(2), padding=(1, 1)");
  // Default init as PyTorch's: U(+-1/sqrt(fan_in)) with fan_in = C_in * k = 6.
  const double bound = 1.0 / std::sqrt(6.0);
  EXPECT_LE(max(abs(conv.weight)).item(), bound);
  EXPECT_LE(max(abs(conv.bias)).item(), bound);
  // Explicit {left, right} padding: a causal convolution keeps the length.
  nn::Conv1d causal(nn::Conv1dOptions(1, 1, 3).explicit_padding({2, 0}));
  EXPECT_EQ(causal(zeros({1, 1, 5})).sizes(), Shape({1, 1, 5}));
}

TEST(Conv1d, GradientsByFiniteDifferences) {
  manual_seed(43);
  nn::Conv1d conv(nn::Conv1dOptions(2, 3, 3).stride(2).explicit_padding({1, 2}));
  conv.to(DType::f64);
  EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return conv(in[0]); },
                 {test::rand_leaf({2, 2, 6}, 44), conv.weight, conv.bias});
}

TEST(Conv1d, DilatedAndGroupedMatchTheDirectReference) {
  // PyTorch's shapes: weight (C_out, C_in / groups, k); fan_in = C_in / groups * k = 6.
  manual_seed(45);
  nn::Conv1d conv(nn::Conv1dOptions(4, 6, 3).dilation(2).groups(2).padding(2));
  EXPECT_EQ(conv.weight.sizes(), Shape({6, 2, 3}));
  EXPECT_EQ(conv.extra_repr(),
            "4, 6, kernel_size=(3), stride=(1), padding=(2, 2), dilation=(2), groups=2");
  EXPECT_LE(max(abs(conv.weight)).item(), 1.0 / std::sqrt(6.0));
  const Tensor x = randn({2, 4, 9});
  const Tensor y = conv(x);
  EXPECT_EQ(y.sizes(), Shape({2, 6, 9}));
  auto as_3d = [](const Tensor& t) { return t.unsqueeze(2).unsqueeze(2); };
  const Tensor ref = test::reference_conv3d(as_3d(x), as_3d(conv.weight), conv.bias, {1, 1, 1},
                                            {0, 0, 2}, {1, 1, 9}, {1, 1, 2}, 2);
  EXPECT_CLOSE(y.to(DType::f64), ref.view({2, 6, 9}), 1e-5, 1e-5);
  // Depthwise 2-D: one (1, 3, 3) filter per channel.
  nn::Conv2d depthwise(nn::Conv2dOptions(3, 3, 3).groups(3).padding(1));
  EXPECT_EQ(depthwise.weight.sizes(), Shape({3, 1, 3, 3}));
  EXPECT_EQ(depthwise(zeros({1, 3, 5, 5})).sizes(), Shape({1, 3, 5, 5}));
}

TEST(Conv1d, RefusesBadOptionsAndInputsNamingThem) {
  EXPECT_TRUE(test::throws_with([] { nn::Conv1d(nn::Conv1dOptions(2, 2, 3).dilation(0)); },
                                "Conv1d: dilations must be positive, got dilation=(0)"));
  EXPECT_TRUE(test::throws_with([] { nn::Conv1d(nn::Conv1dOptions(4, 6, 3).groups(4)); },
                                "Conv1d: groups=4 must be positive and divide in_channels (4) "
                                "and out_channels (6)"));
  EXPECT_TRUE(test::throws_with([] { nn::Conv2d(nn::Conv2dOptions(2, 2, 3).groups(0)); },
                                "Conv2d: groups=0 must be positive"));
  nn::Conv1d conv(2, 3, 3);
  EXPECT_TRUE(test::throws_with(
      [&] {
        conv(zeros({2, 2, 4, 4}));
      },
      "Conv1d: expected a 3-D input (N, C, L), got [2, 2, 4, 4]"));
  EXPECT_TRUE(test::throws_with([&] { conv(zeros({2, 4, 4})); }, "has 4 channels, expected 2"));
}

TEST(EmbeddingPadding, RowStartsAtZeroAndLearnsNothing) {
  manual_seed(45);
  nn::Embedding emb(nn::EmbeddingOptions(5, 3).padding_idx(-2));  // row 3, as PyTorch wraps it
  EXPECT_EQ(*emb.options.padding_idx(), 3);
  EXPECT_TRUE(values_are(emb.weight.narrow(0, 3, 1), {0, 0, 0}, 0));
  EXPECT_GT(sum(abs(emb.weight)).item(), 0.0);
  EXPECT_EQ(emb.extra_repr(), "5, 3, padding_idx=3");
  // Ids [3, 1, 3, 4]: rows 1 and 4 get the output gradient, row 3 none.
  const Tensor ids = from_vector({3, 1, 3, 4}, {2, 2}, DType::i64);
  const Tensor y = emb(ids);
  EXPECT_TRUE(values_are(y.narrow(0, 0, 1).narrow(1, 0, 1), {0, 0, 0}, 0));
  sum(mul(y, full({2, 2, 3}, 2.0))).backward();
  EXPECT_TRUE(values_are(emb.weight.grad(), {0, 0, 0, 2, 2, 2, 0, 0, 0, 0, 0, 0, 2, 2, 2}, 0));
  // The row's value, set to something else, is still what a lookup returns (as PyTorch's).
  {
    autograd::NoGradGuard ng;
    emb.weight.narrow(0, 3, 1).fill_(7.0);
  }
  EXPECT_TRUE(values_are(emb(from_vector({3}, {1}, DType::i32)), {7, 7, 7}, 0));
  emb.reset_parameters();
  EXPECT_TRUE(values_are(emb.weight.narrow(0, 3, 1), {0, 0, 0}, 0));
}

TEST(EmbeddingPadding, GradientsByFiniteDifferencesAndErrors) {
  manual_seed(46);
  nn::Embedding emb(nn::EmbeddingOptions(4, 2).padding_idx(0));
  emb.to(DType::f64);
  // Lookups of other rows differentiate as usual (the padding row's output does depend on
  // it, so differences would see a gradient there: compared with the plain layer instead).
  EXPECT_GRAD_OK(
      [&](const std::vector<Tensor>&) {
        return emb(from_vector({1, 2, 3, 2}, {4}, DType::i64));
      },
      {emb.weight});
  emb.weight.set_grad(Tensor());
  nn::Embedding plain(4, 2);
  plain.to(DType::f64);
  {
    autograd::NoGradGuard ng;
    plain.weight.copy_(emb.weight);
  }
  const Tensor ids = from_vector({0, 2, 3, 0}, {2, 2}, DType::i64);
  const Tensor w = seq({2, 2, 2}, 0.7, 0.2);
  sum(mul(emb(ids), w)).backward();
  sum(mul(plain(ids), w)).backward();
  EXPECT_TRUE(values_are(emb.weight.grad().narrow(0, 0, 1), {0, 0}, 0));
  EXPECT_CLOSE(emb.weight.grad().narrow(0, 1, 3), plain.weight.grad().narrow(0, 1, 3), 0, 0);
  EXPECT_GT(sum(abs(plain.weight.grad().narrow(0, 0, 1))).item(), 0.0);
  EXPECT_TRUE(test::throws_with([] { nn::Embedding(nn::EmbeddingOptions(4, 2).padding_idx(4)); },
                                "Embedding: padding_idx 4 must be in [-4, 4)"));
  EXPECT_TRUE(test::throws_with([] { nn::Embedding(nn::EmbeddingOptions(4, 2).padding_idx(-5)); },
                                "Embedding: padding_idx -5 must be in [-4, 4)"));
}
