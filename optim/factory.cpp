// The optimizer factory.
#include "optim/factory.h"

#include <cmath>

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
    o.momentum(cfg.momentum)
        .dampening(cfg.dampening)
        .nesterov(cfg.nesterov)
        .weight_decay(cfg.weight_decay);
    return std::make_unique<SGD>(std::move(params), o);
  }
  ZT_FAIL("unknown optimizer '", cfg.type, "': expected adamw, adam or sgd");
}

// For each pattern, the parameters (indices) one of whose names it matches; a pattern
// that matches none is an error saying which `what` it is in. `names[i]`: parameter i's
// names, the first its own, the others those of a tied tensor's other registrations.
std::vector<std::vector<size_t>> match(const std::vector<std::string>& patterns,
                                       const std::vector<std::vector<std::string>>& names,
                                       const std::string& what) {
  std::vector<std::vector<size_t>> out(patterns.size());
  for (size_t k = 0; k < patterns.size(); ++k) {
    for (size_t i = 0; i < names.size(); ++i)
      for (const std::string& n : names[i])
        if (glob_match(patterns[k], n)) {
          out[k].push_back(i);
          break;
        }
    if (!out[k].empty()) continue;
    std::vector<std::string> first;
    for (const auto& n : names) first.push_back(n.front());
    ZT_FAIL("optimizer: the ", what, " pattern '", patterns[k], "' matches no trained parameter; ",
            first.empty() ? "there are none" : "they are named like " + list_names(first, 4));
  }
  return out;
}

// Each parameter's settings under `cfg`: its weight decay (left out by weight_decay_1d and
// no_weight_decay), then the settings of its param_group, if any; `dims[i]` is parameter
// i's number of dimensions.
std::vector<ParamSettings> settings_of(const OptimizerConfig& cfg,
                                       const std::vector<std::vector<std::string>>& names,
                                       const std::vector<int64_t>& dims) {
  std::vector<ParamSettings> out(names.size(), ParamSettings{1.0, cfg.weight_decay});
  for (size_t i = 0; i < names.size(); ++i)
    if (!cfg.weight_decay_1d && dims[i] < 2) out[i].weight_decay = 0.0;
  for (const auto& hits : match(cfg.no_weight_decay, names, "no_weight_decay"))
    for (size_t i : hits) out[i].weight_decay = 0.0;
  std::vector<int> group_of(names.size(), -1);
  for (size_t k = 0; k < cfg.param_groups.size(); ++k) {
    const ParamGroup& g = cfg.param_groups[k];
    ZT_CHECK(!g.params.empty(), "optimizer: param_groups[", k, "] lists no parameters");
    ZT_CHECK(std::isfinite(g.lr_scale) && g.lr_scale >= 0, "optimizer: param_groups[", k,
             "] has lr_scale ", g.lr_scale, "; a learning-rate scale must be finite and >= 0");
    ZT_CHECK(!g.weight_decay || (std::isfinite(*g.weight_decay) && *g.weight_decay >= 0),
             "optimizer: param_groups[", k, "] has weight_decay ", g.weight_decay.value_or(0),
             "; a weight decay must be finite and >= 0");
    for (const auto& hits : match(g.params, names, "param_groups[" + std::to_string(k) + "]"))
      for (size_t i : hits) {
        ZT_CHECK(group_of[i] < 0 || group_of[i] == static_cast<int>(k), "optimizer: '",
                 names[i].front(), "' is in param_groups[", group_of[i], "] and param_groups[", k,
                 "]; a parameter may be in one group only");
        group_of[i] = static_cast<int>(k);
        out[i].lr_scale = g.lr_scale;
        if (g.weight_decay) out[i].weight_decay = *g.weight_decay;
      }
  }
  return out;
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

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, NamedTensors params,
                                          std::vector<int64_t> dims,
                                          const std::vector<std::vector<std::string>>& aliases) {
  if (dims.empty())
    for (const auto& [name, t] : params) dims.push_back(t.dim());
  ZT_CHECK(dims.size() == params.size() && (aliases.empty() || aliases.size() == params.size()),
           "make_optimizer: ", params.size(), " parameters but ", dims.size(),
           " dimension counts and ", aliases.size(), " alias lists");
  std::vector<std::vector<std::string>> names;
  for (size_t i = 0; i < params.size(); ++i) {
    names.push_back({params[i].first});
    if (!aliases.empty())
      names.back().insert(names.back().end(), aliases[i].begin(), aliases[i].end());
  }
  const std::vector<ParamSettings> settings = settings_of(cfg, names, dims);
  std::unique_ptr<Optimizer> opt = build(cfg, std::move(params));
  for (size_t i = 0; i < names.size(); ++i)
    if (settings[i].lr_scale != 1.0 || settings[i].weight_decay != cfg.weight_decay)
      opt->set_settings({names[i].front()}, settings[i]);
  return opt;
}

}  // namespace zt::optim
