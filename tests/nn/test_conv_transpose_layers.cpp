// ConvTranspose1d/2d/3d against torch.nn: PyTorch's weight layout (C_in, C_out/groups, *k),
// state dict, printed form and default init bounds, outputs and every gradient on a
// strided, padded, output-padded, grouped and dilated case, the 1-D layer, and refused
// options.
#include <cmath>
#include <string>

#include "common/test_util.h"
#include "nn/conv.h"
#include "nn/nn_test_util.h"
#include "nn/state_dict.h"

using namespace zt;
using zt::nn_test::keys;
using zt::nn_test::seq;
using zt::test::values_are;

TEST(ConvTranspose2d, ShapesStateDictAndInitAsPyTorch) {
  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions(4, 6, 4).stride(2).padding(1).groups(2));
  EXPECT_EQ(up.weight.sizes(), Shape({4, 3, 4, 4}));
  EXPECT_EQ(up.bias.sizes(), Shape({6}));
  EXPECT_EQ(keys(nn::state_dict(up)), std::vector<std::string>({"weight", "bias"}));
  EXPECT_EQ(up.extra_repr(), "4, 6, kernel_size=(4, 4), stride=(2, 2), padding=(1, 1), groups=2");
  // fan_in = C_out / groups * kh * kw = 48, as torch computes it from the weight.
  const double bound = 1.0 / std::sqrt(48.0);
  EXPECT_LE(max(abs(up.weight)).item(), bound);
  EXPECT_LE(max(abs(up.bias)).item(), bound);
  // Kernel 4, stride 2, padding 1 doubles H and W.
  EXPECT_EQ(up(zeros({2, 4, 5, 7})).sizes(), Shape({2, 6, 10, 14}));
  nn::ConvTranspose3d up3(nn::ConvTranspose3dOptions(2, 2, {1, 2, 2}).stride({1, 2, 2}));
  EXPECT_EQ(up3(zeros({1, 2, 3, 4, 4})).sizes(), Shape({1, 2, 3, 8, 8}));
}

TEST(ConvTranspose2d, MatchesPyTorchForwardAndBackward) {
  // torch.nn.ConvTranspose2d(4, 4, (2, 3), stride=2, padding=(0, 1), output_padding=1,
  // groups=2, dilation=(1, 2)), weight seq(w, 0.37, 0.2), bias seq((4), 1.1, -0.3), on
  // x = seq((1, 4, 1, 2), 0.53, 0.1), backward from seq(y, 0.29, 0.7).
  nn::ConvTranspose2d m(nn::ConvTranspose2dOptions(4, 4, {2, 3})
                            .stride(2)
                            .padding({0, 1})
                            .output_padding(1)
                            .groups(2)
                            .dilation({1, 2}));
  EXPECT_EQ(m.extra_repr(),
            "4, 4, kernel_size=(2, 3), stride=(2, 2), padding=(0, 1), dilation=(1, 2), "
            "output_padding=(1, 1), groups=2");
  m.to(DType::f64);
  {
    autograd::NoGradGuard ng;
    m.weight.copy_(seq({4, 2, 2, 3}, 0.37, 0.2));
    m.bias.copy_(seq({4}, 1.1, -0.3));
  }
  Tensor x = seq({1, 4, 1, 2}, 0.53, 0.1).set_requires_grad(true);
  Tensor y = m(x);
  ASSERT_EQ(y.sizes(), Shape({1, 4, 3, 6}));
  EXPECT_TRUE(values_are(
      y, {-0.29552020666133955, -1.9914054172196132,  -0.29552020666133955, -1.5662010791205632,
          -0.29552020666133955, -0.5994817524248857,  -0.29552020666133955, -0.2806765104763477,
          -0.29552020666133955, 0.40565400037119465,  -0.29552020666133955, 0.43115101064465683,
          -0.29552020666133955, -0.29552020666133955, -0.29552020666133955, -0.29552020666133955,
          -0.29552020666133955, -0.29552020666133955, 0.7173560908995228,   2.4264421423771396,
          0.7173560908995228,   2.611607336157247,    0.7173560908995228,   1.6675630879827223,
          0.7173560908995228,   2.2224419864987945,   0.7173560908995228,   1.700783147479322,
          0.7173560908995228,   0.8357258426767233,   0.7173560908995228,   0.7173560908995228,
          0.7173560908995228,   0.7173560908995228,   0.7173560908995228,   0.7173560908995228,
          0.9463000876874145,   0.41602633718849835,  0.9463000876874145,   -0.10784237743502068,
          0.9463000876874145,   0.1842881615100378,   0.9463000876874145,   -0.6759670747698386,
          0.9463000876874145,   -0.6433300448903055,  0.9463000876874145,   0.3599755409766444,
          0.9463000876874145,   0.9463000876874145,   0.9463000876874145,   0.9463000876874145,
          0.9463000876874145,   0.9463000876874145,   0.14112000805986677,  -0.7713257954782313,
          0.14112000805986677,  -0.21843221843835672, 0.14112000805986677,  0.3817000097506348,
          0.14112000805986677,  0.9519281006254071,   0.14112000805986677,  1.410992063872471,
          0.14112000805986677,  0.9413978916697147,   0.14112000805986677,  0.14112000805986677,
          0.14112000805986677,  0.14112000805986677,  0.14112000805986677,  0.14112000805986677},
      1e-12));
  y.backward(seq(y.sizes(), 0.29, 0.7));
  EXPECT_TRUE(values_are(
      x.grad(),
      {0.08396909616767145, -0.09303327852821214, 0.11791473103594452, 0.32923199806979475,
       -0.1067509657907047, -0.07984485754844484, 0.614110109172403, 0.8873341088897927},
      1e-12));
  EXPECT_TRUE(values_are(
      m.weight.grad(),
      {0.49254032279605264,  0.67260790099242,     0.5928879205199888,    0.23569883553627646,
       -0.05880768757380096, -0.4176301695760215,  -0.04307826087204196,  0.27866799240925905,
       0.5699396700129101,   0.5864310259596819,   0.5589478144843667,    0.2602794392034783,
       0.8300932465619902,   1.7593745524708955,   1.7477626830627684,    0.3972304449928304,
       0.2003619370927294,   -0.8293113044387772,  -0.07260110851538233,  0.41491364734784425,
       1.3238794090458277,   0.9883301157154566,   1.6871146315507533,    1.0225790408658497,
       -0.34620922898973766, -0.9241321268943585,  -0.4116547764268578,   0.2166438354034002,
       0.8055691896484761,   1.1121926415129362,   -0.3086712526628194,   -1.0254358139517858,
       -1.1246789658881156,  -0.16928578859074597, -0.3074589873178097,   0.34171216372531626,
       0.5621706678583667,   0.45243827374826195,  0.05821819738063376,   -0.3517838331217268,
       -0.6521795822946866,  -0.736004144813905,   0.5012169223925557,    0.7305812305975915,
       0.672126196189885,    0.27488436720388787,  -0.013268510281840014, -0.4160329142287696},
      1e-12));
  EXPECT_TRUE(values_are(
      m.bias.grad(),
      {-0.08210991281961377, 3.0250832212011316, 3.023040680996478, -0.08613817338097518}, 1e-12));
}

TEST(ConvTranspose1d, MatchesPyTorchAndChecksItsOptions) {
  // torch.nn.ConvTranspose1d(2, 3, 4, stride=2, padding=1, bias=False), weight
  // seq(w, 0.41, -0.5), on seq((2, 2, 3), 0.7, 0.3).
  nn::ConvTranspose1d m(nn::ConvTranspose1dOptions(2, 3, 4).stride(2).padding(1).bias(false));
  EXPECT_EQ(m.weight.sizes(), Shape({2, 3, 4}));
  EXPECT_FALSE(m.bias.defined());
  m.to(DType::f64);
  {
    autograd::NoGradGuard ng;
    m.weight.copy_(seq({2, 3, 4}, 0.41, -0.5));
  }
  Tensor y = m(seq({2, 2, 3}, 0.7, 0.3));
  ASSERT_EQ(y.sizes(), Shape({2, 3, 6}));
  EXPECT_TRUE(values_are(
      y, {-0.6973578682462671,  -0.9338863087057324, -0.3195322416226029,  0.3392324161065195,
          1.0550491779725104,   0.8405973424211581,  0.4209100521076373,   1.4084215936223439,
          1.6259279668332514,   1.8383941058873898,  1.4996902294157008,   0.5736290466654974,
          0.6391473139939801,   0.7391059722059987,  0.09467144856305769,  -0.593476616980288,
          -1.2624516836240107,  -0.9199284597808133, -0.22153018238929784, -0.9674655339426452,
          -1.601387036913739,   -1.7808148970056208, -2.041285745022268,   -0.9724268070489528,
          -0.9194561765898983,  -1.7203021777200678, -1.1436280382902333,  -0.8981264648255345,
          -0.08732321628160872, 0.2101148893444067,  0.34868811882247136,  1.2053779875537391,
          1.7595472462838546,   1.9050230004813056,  2.0533622748969806,   0.9433685697743813},
      1e-12));
  EXPECT_TRUE(test::throws_with(
      [] { nn::ConvTranspose1d(nn::ConvTranspose1dOptions(2, 2, 3).stride(2).output_padding(2)); },
      "ConvTranspose1d: output_padding=(2) must be non-negative and smaller than the stride or "
      "the dilation in each dim; dim 0 has output_padding 2, stride 2, dilation 1"));
  EXPECT_TRUE(test::throws_with(
      [] {
        nn::ConvTranspose2d(
            nn::ConvTranspose2dOptions(2, 2, 3).stride({2, 1}).dilation({1, 3}).output_padding(
                {1, 3}));
      },
      "dim 1 has output_padding 3, stride 1, dilation 3"));
  EXPECT_TRUE(
      test::throws_with([] { nn::ConvTranspose2d(nn::ConvTranspose2dOptions(4, 6, 3).groups(4)); },
                        "ConvTranspose2d: groups=4 must be positive and divide in_channels (4) and "
                        "out_channels (6)"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        m(zeros({1, 3, 4}, DType::f64));
      },
      "ConvTranspose1d: input [1, 3, 4] has 3 channels, expected 2"));
}

TEST(ConvTranspose2d, OutputPaddingBelowTheDilationAsPyTorchAllows) {
  // stride (2, 1), dilation (1, 3): the largest output_padding is (1, 2); the output is
  // (4 - 1) * 2 + 2 + 1 + 1 = 10 by (5 - 1) + 3 * 2 + 1 + 2 = 13, its last two columns zero
  // (no padding to shift them in) but for the bias.
  nn::ConvTranspose2d m(
      nn::ConvTranspose2dOptions(2, 3, 3).stride({2, 1}).dilation({1, 3}).output_padding({1, 2}));
  m.to(DType::f64);
  Tensor y = m(test::rand_leaf({2, 2, 4, 5}, 48));
  ASSERT_EQ(y.sizes(), Shape({2, 3, 10, 13}));
  Tensor tail = y.narrow(3, 11, 2) - m.bias.view({1, 3, 1, 1});
  EXPECT_EQ(max(abs(tail)).item(), 0.0);
}

TEST(ConvTranspose2d, GradientsByFiniteDifferences) {
  manual_seed(46);
  nn::ConvTranspose2d m(nn::ConvTranspose2dOptions(2, 3, {2, 3}).stride({2, 1}).padding({0, 1}));
  m.to(DType::f64);
  EXPECT_GRAD_OK([&](const std::vector<Tensor>& in) { return m(in[0]); },
                 {test::rand_leaf({2, 2, 3, 3}, 47), m.weight, m.bias});
}
