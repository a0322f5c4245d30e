// InstanceNorm1d/2d/3d against torch.nn: outputs and every gradient with an affine
// transform, PyTorch's defaults (no affine, eps 1e-5), the state dict, and refused
// inputs and options.
#include <string>

#include "common/test_util.h"
#include "nn/nn_test_util.h"
#include "nn/norm.h"
#include "nn/state_dict.h"

using namespace zt;
using zt::nn_test::keys;
using zt::nn_test::seq;
using zt::test::values_are;

TEST(InstanceNorm2d, MatchesPyTorchWithAnAffineTransform) {
  // torch.nn.InstanceNorm2d(3, affine=True, eps=1e-3), weight seq((3), 0.9, 0.4), bias
  // seq((3), 0.6, -1), on seq((2, 3, 2, 3), 0.77, 0.2), backward from seq(y, 0.31, 0.5).
  nn::InstanceNorm2d norm(nn::InstanceNormOptions(3).affine(true).eps(1e-3));
  EXPECT_EQ(keys(nn::state_dict(norm)), std::vector<std::string>({"weight", "bias"}));
  EXPECT_EQ(norm.extra_repr(), "3, eps=0.001, affine=true");
  norm.to(DType::f64);
  {
    autograd::NoGradGuard ng;
    norm.weight.copy_(seq({3}, 0.9, 0.4));
    norm.bias.copy_(seq({3}, 0.6, -1.0));
  }
  Tensor x = seq({2, 3, 2, 3}, 0.77, 0.2).set_requires_grad(true);
  Tensor y = norm(x);
  EXPECT_TRUE(values_are(
      y, {-0.8928106831929149,  -0.4919392179229678, -0.3889819194945765,  -0.6420250986524034,
          -1.1083071934601496,  -1.5247617961243674, -1.8689893513582103,  -1.408093238283617,
          -0.47945040146918855, 0.39301868706992354, 0.7170855853914223,   0.30991866479776703,
          0.614441848077399,    -0.3752505280481121, -0.7942934009858874,  -0.40627172387327837,
          0.5699009531434445,   1.5834888364568012,  -0.29253027921072094, -0.4074909881561142,
          -0.7417311121503527,  -1.1066795056600573, -1.2964400727817977,  -1.203953950888336,
          -1.274451382024269,   0.04780440638824688, 0.7956300690074704,   0.5471183250013832,
          -0.5575258027090336,  -1.8950856695157008, -0.8263860648660742,  -0.7315104174361465,
          -0.1293888145558092,  0.6402745842363384,  1.1432521133598121,   1.0957745840322461},
      1e-10));
  y.backward(seq(y.sizes(), 0.31, 0.5));
  EXPECT_TRUE(values_are(
      x.grad(),
      {-0.22433464482692533, -0.05742051736112525, 0.057737133162285646,  0.10893581664187295,
       0.09430334776654833,  0.020778864617343306, 0.0068185788804363545, -0.03741345738900836,
       0.14659988428468895,  0.276552776763635,    0.09130870350785751,   -0.4838664860476094,
       -0.18981200387751773, -0.05489755691309701, 0.05204221193009013,   0.0650024155577231,
       0.034425991473327,    0.09323894182947469,  -0.050382386598097705, 0.045063514012307286,
       0.020284249912647705, -0.04010848695549608, -0.040551215839001876, 0.06569432546764074,
       1.0579789423739563,   0.5085132039284459,   -0.018440878736129266, -0.36216450984692694,
       -0.5266043227660638,  -0.6592824349532829,  0.1745135228785667,    -0.07540785436011417,
       -0.13393194614068232, -0.06744708497436794, 0.025715775957915722,  0.07655758663868162},
      1e-10));
  EXPECT_TRUE(values_are(norm.weight.grad(),
                         {-2.520321477501764, -1.6986752403206369, -0.2385522665927966}, 1e-10));
  EXPECT_TRUE(values_are(norm.bias.grad(), {7.77697158655827, 3.418009971421001, -9.72652968303758},
                         1e-10));
}

TEST(InstanceNorm1d, DefaultsMatchPyTorchAndBadInputsAreRefused) {
  // torch.nn.InstanceNorm1d(2) on seq((2, 2, 4), 1.3, 0): no parameters, eps 1e-5.
  nn::InstanceNorm1d norm(nn::InstanceNormOptions(2));
  EXPECT_TRUE(nn::state_dict(norm).empty());
  EXPECT_TRUE(
      values_are(norm(seq({2, 2, 4}, 1.3, 0.0)),
                 {-0.32189683329087054, 1.2459986115077606, 0.5169235564880499, -1.44102533470494,
                  -1.55023264207102, 0.07825897859197795, 1.2395804964006676, 0.2323931670783746,
                  -1.0080498317558952, -0.9231857856251802, 0.6004729143017729, 1.3307627030793026,
                  0.5217043161502969, -1.2069945560503224, -0.6663311452259827, 1.3516213851260084},
                 1e-10));
  EXPECT_TRUE(test::throws_with(
      [&] {
        norm(zeros({2, 3, 4}));
      },
      "InstanceNorm1d: input [2, 3, 4] must be (N, 2, L)"));
  EXPECT_TRUE(test::throws_with(
      [&] {
        norm(zeros({2, 2, 1}));
      },
      "expected more than one spatial element per channel"));
  norm.eval();  // without running statistics, eval normalizes by the input's own too
  EXPECT_TRUE(test::throws_with(
      [&] {
        norm(zeros({2, 2, 1}));
      },
      "expected more than one spatial element per channel"));
  EXPECT_TRUE(test::throws_with(
      [] { nn::InstanceNorm3d(nn::InstanceNormOptions(2).track_running_stats(true)); },
      "InstanceNorm3d: track_running_stats=true is not supported"));
}
