// What the reliability and resume tests share: the tiny vqtok config with their schedule,
// scratch folders and reading metrics lines back.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/app_test_util.h"

namespace zt::reltest {

// The shared tiny config with this schedule: 4 steps, a checkpoint every 2 (all kept), no eval.
inline config::AppConfig tiny_config(const std::string& out_dir,
                                     std::vector<std::string> sets = {}) {
  sets.insert(sets.begin(), {"train.steps=4", "train.eval_every=0", "train.checkpoint_every=2",
                             "train.keep_checkpoints=0"});
  return apptest::tiny_vqtok_config(out_dir, std::move(sets));
}

inline std::string fresh_dir(const std::string& name) {
  return apptest::fresh_dir("zt_rel", name);
}

inline std::vector<std::string> lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream f(path);
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The record of `step` in metrics lines, as text ("" when absent).
inline std::string line_of_step(const std::vector<std::string>& ls, int64_t step) {
  for (const std::string& l : ls)
    if (nlohmann::json::parse(l).value("step", int64_t{-1}) == step) return l;
  return "";
}

}  // namespace zt::reltest
