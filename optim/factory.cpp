// The optimizer factory.
#include "optim/factory.h"

#include "optim/adam.h"
#include "optim/sgd.h"

namespace zt::optim {

namespace {

std::unique_ptr<Optimizer> build(const OptimizerConfig& cfg, NamedTensors params) {
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

// The parameters, by name, that `cfg` leaves out of weight decay; `dims[i]` is the number
// of dimensions of the parameter named `names[i]`.
std::vector<std::string> weight_decay_exclusions(const OptimizerConfig& cfg,
                                                 const std::vector<std::string>& names,
                                                 const std::vector<int64_t>& dims) {
  ZT_CHECK(names.size() == dims.size(), "make_optimizer: ", names.size(), " parameters but ",
           dims.size(), " dimension counts");
  std::vector<std::string> out;
  std::vector<bool> used(cfg.no_weight_decay.size(), false);
  for (size_t i = 0; i < names.size(); ++i) {
    bool excluded = !cfg.weight_decay_1d && dims[i] < 2;
    for (size_t k = 0; k < cfg.no_weight_decay.size(); ++k)
      if (glob_match(cfg.no_weight_decay[k], names[i])) excluded = used[k] = true;
    if (excluded) out.push_back(names[i]);
  }
  for (size_t k = 0; k < used.size(); ++k)
    ZT_CHECK(used[k], "optimizer: the no_weight_decay pattern '", cfg.no_weight_decay[k],
             "' matches no trained parameter; ",
             names.empty() ? "there are none" : "they are named like " + list_names(names, 4));
  return out;
}

// Gives the parameters of each of cfg's param_groups the group's settings.
void apply_param_groups(const OptimizerConfig& cfg, const std::vector<std::string>& names,
                        Optimizer& opt) {
  std::vector<int> group_of(names.size(), -1);
  for (size_t k = 0; k < cfg.param_groups.size(); ++k) {
    const ParamGroup& g = cfg.param_groups[k];
    ZT_CHECK(!g.params.empty(), "optimizer: param_groups[", k, "] lists no parameters");
    for (const std::string& pattern : g.params) {
      bool matched = false;
      for (size_t i = 0; i < names.size(); ++i) {
        if (!glob_match(pattern, names[i])) continue;
        matched = true;
        ZT_CHECK(group_of[i] < 0 || group_of[i] == static_cast<int>(k), "optimizer: '", names[i],
                 "' is in param_groups[", group_of[i], "] and param_groups[", k,
                 "]; a parameter may be in one group only");
        group_of[i] = static_cast<int>(k);
      }
      ZT_CHECK(matched, "optimizer: the param_groups[", k, "] pattern '", pattern,
               "' matches no trained parameter; ",
               names.empty() ? "there are none" : "they are named like " + list_names(names, 4));
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (group_of[i] < 0) continue;
    const ParamGroup& g = cfg.param_groups[static_cast<size_t>(group_of[i])];
    ParamSettings s = opt.settings(names[i]);
    s.lr_scale = g.lr_scale;
    if (g.weight_decay) s.weight_decay = *g.weight_decay;
    opt.set_settings({names[i]}, s);
  }
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& text) {
  // Greedy, backtracking to the last '*' only: no recursion.
  size_t p = 0, t = 0, star = std::string::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg,
                                          std::vector<std::pair<std::string, Tensor>> params,
                                          std::vector<int64_t> dims) {
  std::vector<std::string> names;
  for (const auto& [name, t] : params) names.push_back(name);
  if (dims.empty())
    for (const auto& [name, t] : params) dims.push_back(t.dim());
  const std::vector<std::string> excluded = weight_decay_exclusions(cfg, names, dims);
  std::unique_ptr<Optimizer> opt = build(cfg, std::move(params));
  opt->exclude_from_weight_decay(excluded);
  apply_param_groups(cfg, names, *opt);
  return opt;
}

}  // namespace zt::optim
