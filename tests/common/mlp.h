// A small multilayer perceptron for engine tests (header only: for the test folders that
// link nn): Linear(in, hidden) -> tanh -> Linear(hidden, hidden) -> gelu -> Linear(hidden, out).
#pragma once

#include <memory>

#include "nn/nn.h"

namespace zt::test {

/// The perceptron above, as an nn::Sequential (children "0" ... "4").
inline std::shared_ptr<nn::Sequential> mlp(int64_t in, int64_t hidden, int64_t out) {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(in, hidden), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(hidden, hidden), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(hidden, out)});
}

}  // namespace zt::test
