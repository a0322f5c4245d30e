// Basics: views share storage, broadcasting, and a first gradient.
#include "common/test_util.h"

using namespace zt;
using zt::test::values_are;

TEST(Tensor, ViewsShareStorage) {
  Tensor a = arange(0, 6).reshape({2, 3});
  Tensor t = a.transpose(0, 1);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(values_are(t.contiguous(), {0, 3, 1, 4, 2, 5}));
  a.select(0, 1).fill_(7);
  EXPECT_TRUE(values_are(t.contiguous(), {0, 7, 1, 7, 2, 7}));
}

TEST(Autograd, MulAddBroadcast) {
  Tensor a = test::rand_leaf({2, 3}, 1);
  Tensor b = test::rand_leaf({3}, 2);
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return add(mul(in[0], in[1]), in[1]); },
                 {a, b});
}

TEST(Linalg, MatmulGrad) {
  Tensor a = test::rand_leaf({2, 3, 4}, 1);
  Tensor b = test::rand_leaf({4, 5}, 2);
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b});
  Tensor x = test::rand_leaf({3, 4}, 3), w = test::rand_leaf({5, 4}, 4),
         bias = test::rand_leaf({5}, 5);
  EXPECT_GRAD_OK([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                 {x, w, bias});
}
