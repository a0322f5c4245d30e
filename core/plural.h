// Counts in messages: "1 rank", "4 ranks".
#pragma once

#include <string>

namespace zt {

/// `n` and `noun`, plural unless n is 1: counted(1, "rank") is "1 rank", counted(4, "rank")
/// "4 ranks"; `plural` where an added "s" is wrong (counted(2, "entry", "entries")).
template <typename Int>
std::string counted(Int n, const std::string& noun, const std::string& plural = "") {
  return std::to_string(n) + " " + (n == 1 ? noun : plural.empty() ? noun + "s" : plural);
}

}  // namespace zt
