// ASCII case folding for names that users type or files carry (extensions, keys): only
// 'A'-'Z' change, whatever the locale, and every other byte (UTF-8 included) is kept.
#pragma once

#include <string>

namespace zt {

/// `s` with 'A'-'Z' lowered to 'a'-'z'.
inline std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

}  // namespace zt
