// End to end, single process: an MLP and a small CNN trained on synthetic tasks reach a
// stated loss. Seeded, so the run is deterministic; sizes keep it well under a second.
#include <cmath>

#include "common/test_util.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace zt;

namespace {

// XOR of quadrants: label = (x0 * x1 > 0), points in [-1, 1]^2.
void xor_batch(Generator& g, int64_t n, Tensor& x, Tensor& y) {
  x = sub(mul(rand({n, 2}, g), 2.0), ones({n, 2}));
  std::vector<double> xv = x.to_vector(), yv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) yv[static_cast<size_t>(i)] = xv[2 * i] * xv[2 * i + 1] > 0;
  y = from_vector(yv, {n}, DType::i64);
}

// 8x8 images with one bright horizontal (label 0) or vertical (label 1) bar plus noise.
void bars_batch(Generator& g, int64_t n, Tensor& x, Tensor& y) {
  Tensor noise = mul(randn({n, 1, 8, 8}, g), 0.2);
  Tensor pick = rand({n, 2}, g);
  std::vector<double> img(static_cast<size_t>(n * 64), 0.0), lab(static_cast<size_t>(n));
  std::vector<double> pv = pick.to_vector();
  for (int64_t i = 0; i < n; ++i) {
    bool vertical = pv[2 * i] < 0.5;
    int64_t pos = static_cast<int64_t>(pv[2 * i + 1] * 8) % 8;
    for (int64_t k = 0; k < 8; ++k)
      img[static_cast<size_t>(i * 64 + (vertical ? k * 8 + pos : pos * 8 + k))] = 1.0;
    lab[static_cast<size_t>(i)] = vertical;
  }
  x = add(from_vector(img, {n, 1, 8, 8}), noise);
  y = from_vector(lab, {n}, DType::i64);
}

}  // namespace

TEST(Train, MlpLearnsXorWithAdamW) {
  manual_seed(0);
  Generator data(7);
  nn::Sequential mlp{std::make_shared<nn::Linear>(2, 32), std::make_shared<nn::GELU>(),
                     std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::GELU>(),
                     std::make_shared<nn::Linear>(32, 2)};
  optim::AdamW opt(mlp.named_parameters(), optim::AdamWOptions(0.02).weight_decay(0.0));
  auto sched = optim::LrSchedule::warmup_cosine(0.02, 20, 400, 0.002);
  nn::CrossEntropyLoss ce;
  double loss = 0;
  for (int step = 0; step < 400; ++step) {
    Tensor x, y;
    xor_batch(data, 64, x, y);
    opt.set_lr(sched.lr_at(step));
    opt.zero_grad();
    Tensor l = ce(mlp(x), y);
    l.backward();
    optim::clip_grad_norm(mlp.parameters(), 5.0);
    opt.step();
    loss = 0.9 * loss + 0.1 * l.item();
  }
  Tensor x, y;
  xor_batch(data, 512, x, y);
  double test_loss = ce(mlp(x), y).item();
  EXPECT_LT(test_loss, 0.15) << "running train loss " << loss;
}

TEST(Train, CnnLearnsBarOrientationWithSgd) {
  manual_seed(1);
  Generator data(8);
  nn::Sequential cnn{std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 8, 3).padding(1)),
                     std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions(8)),
                     std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Conv2d>(
                         nn::Conv2dOptions(8, 8, 3).stride(2).explicit_padding({0, 1, 0, 1})),
                     std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Flatten>(),
                     std::make_shared<nn::Linear>(8 * 4 * 4, 2)};
  optim::SGD opt(cnn.named_parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
  nn::CrossEntropyLoss ce;
  for (int step = 0; step < 80; ++step) {
    Tensor x, y;
    bars_batch(data, 32, x, y);
    opt.zero_grad();
    ce(cnn(x), y).backward();
    opt.step();
  }
  cnn.eval();  // BatchNorm now uses the running statistics gathered while training
  Tensor x, y;
  bars_batch(data, 256, x, y);
  EXPECT_LT(ce(cnn(x), y).item(), 0.1);
}
