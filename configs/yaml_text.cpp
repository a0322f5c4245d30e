// Checks on a config's text for errors that name what is written and where: bytes YAML
// refuses, tabs in the indentation, and tags or anchors written where a value should be.
#include "configs/yaml_text.h"

#include <algorithm>
#include <cstring>

namespace zt::config::detail {

int tab_indented_line(const std::string& text, int error) {
  int line = 1;
  for (size_t at = 0; at < text.size() && line <= error; ++line) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (line >= error - 1)
      for (size_t i = at; i < end && (text[i] == ' ' || text[i] == '\t'); ++i)
        if (text[i] == '\t') return line;
    at = end + 1;
  }
  return 0;
}

size_t first_invalid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const unsigned c = s[i];
    size_t n = 0;
    unsigned min = 0, code = 0;
    if (c < 0x80)
      n = 1;
    else if ((c & 0xE0) == 0xC0)
      n = 2, min = 0x80, code = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
      n = 3, min = 0x800, code = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
      n = 4, min = 0x10000, code = c & 0x07;
    else
      return i;
    if (i + n > text.size()) return i;
    for (size_t k = 1; k < n; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    if (n > 1 && (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))) return i;
    i += n;
  }
  return std::string::npos;
}

size_t first_control(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size(); ++i) {
    if (s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') return i;
    if (s[i] == 0xC2 && i + 1 < text.size() && s[i + 1] <= 0x9F && s[i + 1] != 0x85) return i;
  }
  return std::string::npos;
}

std::string place(const std::string& text, size_t at, const std::string& source) {
  const size_t nl = at == 0 ? std::string::npos : text.rfind('\n', at - 1);
  const size_t column = nl == std::string::npos ? at : at - nl - 1;
  return source + ":" + std::to_string(std::count(text.begin(), text.begin() + at, '\n') + 1) +
         ":" + std::to_string(column + 1);
}

std::string tags_and_anchors_alone(const std::string& text, size_t at) {
  std::string said;
  size_t i = at;
  while (i < text.size() && (text[i] == '!' || text[i] == '&')) {
    const size_t end = std::min(text.find_first_of(" \t\r\n,[]{}", i), text.size());
    said += std::string(said.empty() ? "" : " and ") +
            (text[i] == '&' ? "the anchor '" : "the tag '") + text.substr(i, end - i) + "'";
    i = std::min(text.find_first_not_of(" \t", end), text.size());
  }
  // Something else after them on the line (but a comment) is a value, not their absence.
  const bool line_ends = i >= text.size() || std::strchr("\r\n#,]}", text[i]) != nullptr;
  return line_ends ? said : "";
}

}  // namespace zt::config::detail
