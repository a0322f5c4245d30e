// The optimizer factory.
#include "optim/factory.h"

#include "optim/adam.h"
#include "optim/sgd.h"

namespace zt::optim {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg,
                                          std::vector<std::pair<std::string, Tensor>> params) {
  if (cfg.type == "adamw" || cfg.type == "adam")
    ZT_CHECK(!cfg.nesterov, "optimizer '", cfg.type,
             "': nesterov is an SGD option; Adam and AdamW have no Nesterov variant in zt");
  if (cfg.type == "adamw") {
    AdamWOptions o(cfg.lr);
    o.betas(cfg.beta1, cfg.beta2).eps(cfg.eps).weight_decay(cfg.weight_decay);
    return std::make_unique<AdamW>(std::move(params), o);
  }
  if (cfg.type == "adam") {
    AdamOptions o(cfg.lr);
    o.betas(cfg.beta1, cfg.beta2).eps(cfg.eps).weight_decay(cfg.weight_decay);
    return std::make_unique<Adam>(std::move(params), o);
  }
  if (cfg.type == "sgd") {
    SGDOptions o(cfg.lr);
    o.momentum(cfg.momentum).nesterov(cfg.nesterov).weight_decay(cfg.weight_decay);
    return std::make_unique<SGD>(std::move(params), o);
  }
  ZT_FAIL("unknown optimizer '", cfg.type, "': expected adamw, adam or sgd");
}

}  // namespace zt::optim
