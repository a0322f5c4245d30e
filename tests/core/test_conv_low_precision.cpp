// conv2d / conv3d on bf16 and f16 tensors on the CPU (ZeRO mixed precision stores the
// weights in 16 bits): the kernel runs in f32 on the 16-bit values, so the output and
// every gradient are the f32 results rounded once to the input's dtype.
#include "common/test_util.h"

using namespace zt;
using zt::test::all_close;

namespace {

struct Result {
  Tensor y, dx, dw, db;
};

// y = conv(x, w, b) and the gradients of sum(y * go), all in x's dtype.
template <typename Conv>
Result run(Conv conv, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& go) {
  Tensor xl = x.clone().set_requires_grad(true), wl = w.clone().set_requires_grad(true);
  Tensor bl = b.clone().set_requires_grad(true);
  Tensor y = conv(xl, wl, bl);
  y.backward(go);
  return {y, xl.grad(), wl.grad(), bl.grad()};
}

template <typename Conv>
void expect_rounded_f32(Conv conv, const Shape& xs, const Shape& ws, DType dt, double tol) {
  Generator g(21);
  // 16-bit inputs, and the same values in f32 for the reference.
  Tensor x = randn(xs, g).to(dt), w = mul(randn(ws, g), 0.2).to(dt);
  Tensor b = randn({ws[0]}, g).to(dt);
  Tensor go = randn(conv(x, w, b).sizes(), g).to(dt);
  Result low = run(conv, x, w, b, go);
  Result ref = run(conv, x.to(DType::f32), w.to(DType::f32), b.to(DType::f32), go.to(DType::f32));
  const std::pair<const char*, std::pair<Tensor, Tensor>> pairs[] = {{"y", {low.y, ref.y}},
                                                                     {"dx", {low.dx, ref.dx}},
                                                                     {"dw", {low.dw, ref.dw}},
                                                                     {"db", {low.db, ref.db}}};
  for (const auto& [name, p] : pairs) {
    EXPECT_EQ(p.first.dtype(), dt) << name;
    EXPECT_TRUE(all_close(p.first.to(DType::f32), p.second, tol, tol)) << name;
  }
}

}  // namespace

TEST(ConvLowPrecision, Conv2dBf16AndF16MatchF32Rounded) {
  auto conv = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    Conv2dArgs a;
    a.padding = {1, 1, 1, 1};
    return conv2d(x, w, b, a);
  };
  expect_rounded_f32(conv, {2, 3, 6, 5}, {4, 3, 3, 3}, DType::bf16, 1.0 / 128);
  expect_rounded_f32(conv, {2, 3, 6, 5}, {4, 3, 3, 3}, DType::f16, 1.0 / 1024);
}

TEST(ConvLowPrecision, Conv3dBf16AndF16MatchF32Rounded) {
  auto conv = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    Conv3dArgs a;
    a.stride = {2, 1, 1};
    a.padding = {2, 0, 1, 1, 0, 0};
    return conv3d(x, w, b, a);
  };
  expect_rounded_f32(conv, {1, 2, 4, 5, 4}, {3, 2, 3, 3, 1}, DType::bf16, 1.0 / 128);
  expect_rounded_f32(conv, {1, 2, 4, 5, 4}, {3, 2, 3, 3, 1}, DType::f16, 1.0 / 1024);
}
