// Command-line value checks shared by the apps and zt-bench, with messages that say what is
// wanted (CLI11's PositiveNumber prints its whole double range, 309 digits).
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace zt::app {

/// A finite number > 0, for a real-valued option (--temperature); a count takes
/// whole_number, which refuses a fraction.
inline const CLI::Validator kPositive(
    [](std::string& text) -> std::string {
      double v = 0;
      if (CLI::detail::lexical_cast(text, v) && std::isfinite(v) && v > 0) return "";
      return "must be a positive number, got " + text;
    },
    "POSITIVE");

/// A --batch: 0 (the config's train.batch) or a whole number of items up to 2^27, the most
/// train.batch takes (config::kMaxBatch).
inline const CLI::Validator kBatchSize(
    [](std::string& text) -> std::string {
      const bool digits =
          !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
      errno = 0;
      if (digits && std::strtoll(text.c_str(), nullptr, 10) <= (int64_t{1} << 27) && errno == 0)
        return "";
      return "must be a whole number of items from 0 (train.batch) to 134217728 (2^27), got " +
             text;
    },
    "BATCH");

/// A whole number from `lo` to `hi` (0 <= lo <= hi), written in digits alone: CLI11's Range
/// would say that a fraction or a word is "not in range". For an integer option, where a
/// real-number check (kPositive) would pass a fraction on to CLI11's "Could not convert". With
/// `hi` left out, from `lo` up to 2^63 - 1 (an int64 option), said as ">= lo".
inline CLI::Validator whole_number(int64_t lo, int64_t hi = INT64_MAX) {
  const std::string range = hi == INT64_MAX
                                ? ">= " + std::to_string(lo)
                                : "from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        const long long v = digits ? std::strtoll(text.c_str(), nullptr, 10) : 0;
        const bool overflow = errno == ERANGE;  // past 2^63 - 1
        if (digits && !overflow && v >= lo && v <= hi) return "";
        return "must be a whole number " + range +
               (overflow && hi == INT64_MAX ? " below 2^63" : "") + ", got " + text;
      },
      hi == INT64_MAX ? "INT >= " + std::to_string(lo)
                      : "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

/// A seed: a whole number from 0 to 2^64 - 1 (not wrapped or saturated from -1 or more).
inline const CLI::Validator kSeed(
    [](std::string& text) -> std::string {
      const bool digits =
          !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
      errno = 0;
      if (digits && (std::strtoull(text.c_str(), nullptr, 10), errno == 0)) return "";
      return "must be a whole number from 0 to 18446744073709551615, got " + text;
    },
    "SEED");

/// A file or folder to write (-o, --tokens): not empty, which would write nothing (exit 2,
/// a mistake on the command line, as a missing value is).
inline const CLI::Validator kOutputPath(
    [](std::string& text) -> std::string {
      return text.empty() ? "must name the file or folder to write, got an empty path" : "";
    },
    "PATH");

/// A file or folder to read in place of a default (--weights, --checkpoint, --tokenizer,
/// --input): not empty, which would read the default instead, silently (an unset shell
/// variable, say); exit 2, a mistake on the command line, as for an output path.
inline const CLI::Validator kInputPath(
    [](std::string& text) -> std::string {
      return text.empty() ? "must name the file or folder to read, got an empty path (leave "
                            "the option out to read the default)"
                          : "";
    },
    "PATH");

/// A --set override's form, key.path=value: without '=' it is a mistake on the command line
/// (exit 2), found before any config is read.
inline const CLI::Validator kKeyValue(
    [](std::string& text) -> std::string {
      const size_t eq = text.find('=');
      std::string key = eq == std::string::npos ? "" : text.substr(0, eq);
      key.erase(0, key.find_first_not_of(" \t"));  // blanks around the key are not a part
      key.erase(key.find_last_not_of(" \t") + 1);
      const bool parts_named = !key.empty() && key.front() != '.' && key.back() != '.' &&
                               key.find("..") == std::string::npos;
      if (parts_named && text.find_first_not_of(" \t", eq + 1) == std::string::npos)
        return "missing value after '=' in '" + text + "' (e.g. --set train.lr=1e-3)";
      if (parts_named) return "";
      return "expected key.path=value with every part of the path named (e.g. --set "
             "train.lr=1e-3), got '" +
             text + "'";
    },
    "KEY=VALUE");

}  // namespace zt::app
