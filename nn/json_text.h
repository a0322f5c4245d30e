// JSON read from files zt does not trust (checkpoints' meta.json, safetensors headers): how
// deep a text nests, before a parser or dump() recurses once per level into it, and what an
// error message quotes of a value, which is never more than a short scalar.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zt::nn {

/// The deepest nesting of objects and arrays in JSON `text` (strings skipped): 0 for a
/// scalar, 1 for `[1, 2]`, 2 for `{"a": [1]}`. Counted without parsing, so any length is safe.
int json_depth(std::string_view text);
/// Throws an error when JSON `text` nests deeper than `max_depth`: "<what> nests N levels
/// deep (<usual>: corrupt or hostile file)", `usual` saying how deep a valid one nests.
void check_json_depth(std::string_view text, int max_depth, const std::string& what,
                      const std::string& usual);

/// A JSON value as an error message quotes it: a scalar's JSON text (or `[]`, `{}`), cut to
/// its first `max_chars` characters; an array or object only by type and size ("an array
/// of 3 elements"), so that a huge or deeply nested value costs nothing to describe.
std::string json_brief(const nlohmann::json& v, size_t max_chars = 60);

}  // namespace zt::nn
