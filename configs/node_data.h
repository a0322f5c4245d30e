// Internal to zt_config: the data behind a config::Node and the error helpers shared
// by the tree (config.cpp) and the Section reader (section.cpp). Not for other users.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "configs/config.h"

namespace zt::config::detail {

struct NodeData {
  Node::Kind kind = Node::Kind::null;
  std::string text;   // scalar text
  std::string alone;  // null: the tags or anchors written in place of a value, said
                      // ("the tag '!!float'"), or ""
  std::vector<std::pair<std::string, std::shared_ptr<NodeData>>> map;
  std::vector<std::shared_ptr<NodeData>> seq;
  std::string file;
  int line = 0;
  std::string path;
};

/// "parent.key" (or "key" at the root).
inline std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

/// Throws zt::Error "where: path: msg". Thrown directly rather than through ZT_CHECK:
/// the location that helps the user is the YAML file's line, not a source line.
[[noreturn]] void throw_at(const std::string& where, const std::string& path,
                           const std::string& msg);

}  // namespace zt::config::detail
