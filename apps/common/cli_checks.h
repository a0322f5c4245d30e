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

}  // namespace zt::app
