// Internal to zt_config: checks on a config's text before and after yaml-cpp reads it, for
// errors that name what is written and where. Not for other users.
#pragma once

#include <cstddef>
#include <string>

namespace zt::config::detail {

/// Line `error` (1-based) or the one before it, whichever has a tab in its indentation
/// (the line before first), or 0.
int tab_indented_line(const std::string& text, int error);
/// The offset of the first byte of `text` that does not start (or continue) a valid UTF-8
/// sequence, or npos. (Overlong forms and surrogates count as invalid, as in JSON.)
size_t first_invalid_utf8(const std::string& text);
/// The offset of the first control character of UTF-8 `text` that YAML does not allow (all
/// but tab, line feed and carriage return; U+0080 to U+009F but U+0085), or npos. (DEL,
/// which yaml-cpp writes unescaped when it saves a config, is let through.)
size_t first_control(const std::string& text);
/// "source:line:column" of byte `at` of `text`.
std::string place(const std::string& text, size_t at, const std::string& source);
/// What is written at byte `at` of `text`, where YAML found a value with no content, when it
/// is tags and anchors alone ("lr: &a !!float" at the '&'): said as "the anchor '&a' and the
/// tag '!!float'"; "" when anything else is there (nothing, a quoted "", a value on the next
/// line).
std::string tags_and_anchors_alone(const std::string& text, size_t at);

}  // namespace zt::config::detail
