// Adam and AdamW over 16-bit parameters (a model trained in f16 or bf16 without fp32
// masters): the update is computed in f32 and rounded once into the parameter and its
// moments, as PyTorch's reduced-precision kernels compute in float (its addcmul for the
// second moment included). In f16 a gradient past 256 has a square past f16's largest
// value, 65504: squared in f16, the second moment would be inf and the parameter would
// never move again.
#include <memory>

#include "common/test_util.h"
#include "optim/optim.h"

using namespace zt;
using zt::test::values_are;

namespace {

// Two Adam(W) steps at lr 0.1 of a [1, 2] parameter in `dtype`, with gradients [300, 1]
// then [1, 1]; the parameter and the second moment after each step, in f32.
struct Trace {
  Tensor p1, v1, p2;
};
Trace two_steps(DType dtype, bool decoupled) {
  Tensor p = from_vector({1.0, 2.0}, {2}).to(dtype);
  p.set_requires_grad(true);
  std::unique_ptr<optim::Optimizer> opt;
  if (decoupled)
    opt = std::make_unique<optim::AdamW>(NamedTensors{{"p", p}},
                                         optim::AdamWOptions(0.1).weight_decay(0));
  else
    opt = std::make_unique<optim::Adam>(NamedTensors{{"p", p}}, optim::AdamOptions(0.1));
  auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
  Trace out;
  p.set_grad(from_vector({300.0, 1.0}, {2}).to(dtype));
  opt->step();
  out.p1 = f32(p);
  for (const auto& [k, t] : opt->state_dict())
    if (k == "p.exp_avg_sq") out.v1 = f32(t);
  p.set_grad(from_vector({1.0, 1.0}, {2}).to(dtype));
  opt->step();
  out.p2 = f32(p);
  return out;
}

}  // namespace

// torch.optim.Adam(lr=0.1) on a float16 parameter gives [0.8999, 1.9004] with
// exp_avg_sq [90.0, 1.0004e-3], then [0.8325, 1.8008] (PyTorch 2.15, CPU).
TEST(AdamLowPrecision, AGradientWhoseSquareOverflowsF16StillUpdates) {
  for (bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled ? "AdamW" : "Adam");
    const Trace t = two_steps(DType::f16, decoupled);
    EXPECT_TRUE(values_are(t.v1, {90.0, 1.0004e-3}, 1e-3)) << "second moment";
    EXPECT_TRUE(values_are(t.p1, {0.8999, 1.9004}, 1e-3)) << "after the first step";
    EXPECT_TRUE(values_are(t.p2, {0.8325, 1.8008}, 1e-3)) << "after the second step";
  }
}

// bf16 has f32's range: the same steps give the same values to bf16's precision.
TEST(AdamLowPrecision, Bf16TakesTheSameSteps) {
  const Trace t = two_steps(DType::bf16, false);
  EXPECT_TRUE(values_are(t.v1, {90.0, 1e-3}, 1e-2));
  EXPECT_TRUE(values_are(t.p1, {0.9, 1.9}, 1e-2));
  EXPECT_TRUE(values_are(t.p2, {0.8325, 1.8008}, 1e-2));
}
