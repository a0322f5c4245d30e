// Internal to zt_config: hjson (the syntax DeepSpeed reads its config in) turned into the YAML
// flow text that the config reader parses, lines kept.
#pragma once

#include <string>

namespace zt::config::detail {

/// `text`, a DeepSpeed config in hjson, as YAML flow text that reads to the same values, every
/// line on the line it had: comments blanked, the comma a line break stands for put in, and
/// hjson's single-quoted and '''multi-line''' strings written as YAML double-quoted ones. What
/// YAML would read otherwise (an unquoted key with no blank after its ':') or what is left
/// open (a string) is an error at `path`:line:column.
std::string hjson_as_yaml(const std::string& text, const std::string& path);

}  // namespace zt::config::detail
