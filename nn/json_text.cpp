// json_depth counts brackets outside strings; json_brief describes a value without
// serializing a container (dump() recurses once per level of nesting).
#include "nn/json_text.h"

#include <algorithm>

#include "core/error.h"

namespace zt::nn {

int json_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

void check_json_depth(std::string_view text, int max_depth, const std::string& what,
                      const std::string& usual) {
  const int depth = json_depth(text);
  ZT_CHECK(depth <= max_depth, what, " nests ", depth, " levels deep (", usual,
           ": corrupt or hostile file)");
}

std::string json_brief(const nlohmann::json& v, size_t max_chars) {
  if ((v.is_array() || v.is_object()) && !v.empty()) {
    const size_t n = v.size();
    return std::string(v.is_array() ? "an array of " : "an object of ") + std::to_string(n) +
           (v.is_array() ? " element" : " key") + (n == 1 ? "" : "s");
  }
  // A string's invalid UTF-8 is replaced, not thrown on: the message is for a person.
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  max_chars = std::max<size_t>(max_chars, 4);
  if (s.size() > max_chars) s = s.substr(0, max_chars - 3) + "...";
  return s;
}

}  // namespace zt::nn
