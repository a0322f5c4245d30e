// Dropout: inverted dropout in training, identity in eval.
#pragma once

#include "nn/module.h"

namespace zt::nn {

/// x (*) -> (*): each element zeroed with probability p and the rest scaled by 1/(1-p)
/// while training (mask from the default generator); identity in eval().
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5);
  std::string extra_repr() const override;
  double p() const { return p_; }

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  double p_;
};

}  // namespace zt::nn
