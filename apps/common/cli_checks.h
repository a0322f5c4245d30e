// Command-line value checks shared by the apps and zt-bench, with messages that say what is
// wanted (CLI11's PositiveNumber prints its whole double range, 309 digits).
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <string>

namespace zt::app {

/// A finite number > 0.
inline const CLI::Validator kPositive(
    [](std::string& text) -> std::string {
      double v = 0;
      if (CLI::detail::lexical_cast(text, v) && std::isfinite(v) && v > 0) return "";
      return "must be a positive number, got " + text;
    },
    "POSITIVE");

/// A --set override's form, key.path=value: without '=' it is a mistake on the command line
/// (exit 2), found before any config is read.
inline const CLI::Validator kKeyValue(
    [](std::string& text) -> std::string {
      const size_t eq = text.find('=');
      const std::string key = eq == std::string::npos ? "" : text.substr(0, eq);
      const bool parts_named = !key.empty() && key.front() != '.' && key.back() != '.' &&
                               key.find("..") == std::string::npos;
      if (parts_named) return "";
      return "expected key.path=value with every part of the path named (e.g. --set "
             "train.lr=1e-3), got '" +
             text + "'";
    },
    "KEY=VALUE");

}  // namespace zt::app
