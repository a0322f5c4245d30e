// The configuration tree and its YAML front end (parsing, overrides, dumping).
//
// yaml-cpp is used only here: its tree is converted once into NodeData (which keeps
// file, line and key path per node), and everything else reads that.
#include "configs/config.h"
#include "configs/node_data.h"
#include "configs/yaml_text.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"

namespace zt::config {

using detail::first_control;
using detail::first_invalid_utf8;
using detail::join_path;
using detail::NodeData;
using detail::place;
using detail::tab_indented_line;
using detail::throw_at;

void detail::throw_at(const std::string& where, const std::string& path, const std::string& msg) {
  std::string s = where.empty() ? std::string("<config>") : where;
  if (!path.empty()) s += ": " + path;
  throw Error(s + ": " + msg);
}

namespace {

std::string location(const std::string& file, int line) {
  return line > 0 ? file + ":" + std::to_string(line) : file;
}

const NodeData& data_of(const std::shared_ptr<NodeData>& d) {
  ZT_CHECK(d != nullptr, "config: access to an absent node (check operator bool first)");
  return *d;
}

// The most values one document converts to. An alias copies the subtree it names, so a
// few lines of nested aliases stand for billions of values (a YAML "billion laughs").
constexpr int64_t kMaxValues = 100'000;
// The deepest nesting converted: zt's configs nest 4 levels; an alias inside the list or
// map it names (x: &x [*x]) would nest without end.
constexpr int kMaxDepth = 64;

// Converts a yaml-cpp subtree at nesting `depth`. `line_override` >= 0 forces the line
// (overrides). `values` counts the values converted so far, against kMaxValues. `text`, the
// YAML parsed, tells a value that is tags or anchors alone, which reads as no value.
std::shared_ptr<NodeData> convert(const YAML::Node& y, const std::string& file,
                                  const std::string& path, int line_override, int64_t& values,
                                  int depth = 0, const std::string* text = nullptr) {
  auto at = [&] { return location(file, y.Mark().line >= 0 ? y.Mark().line + 1 : 0); };
  if (++values > kMaxValues)
    throw_at(at(), path,
             "the config expands to more than " + std::to_string(kMaxValues) +
                 " values (nested YAML aliases?)");
  if (depth > kMaxDepth)
    throw_at(at(), path.substr(0, 60) + "...",
             "the config nests more than " + std::to_string(kMaxDepth) +
                 " levels (a YAML alias inside what it names?)");
  auto d = std::make_shared<NodeData>();
  d->file = file;
  d->path = path;
  const YAML::Mark m = y.Mark();
  d->line = line_override >= 0 ? line_override : (m.line >= 0 ? m.line + 1 : 0);
  switch (y.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      d->kind = Node::Kind::null;
      if (text && m.pos >= 0) d->alone = detail::tags_and_anchors_alone(*text, m.pos);
      break;
    case YAML::NodeType::Scalar:
      d->kind = Node::Kind::scalar;
      d->text = y.Scalar();
      if (d->text.empty() && text && m.pos >= 0)  // "lr: !!float" is an empty scalar
        if (d->alone = detail::tags_and_anchors_alone(*text, m.pos); !d->alone.empty())
          d->kind = Node::Kind::null;
      break;
    case YAML::NodeType::Sequence:
      d->kind = Node::Kind::sequence;
      for (size_t i = 0; i < y.size(); ++i)
        d->seq.push_back(convert(y[i], file, join_path(path, std::to_string(i)), line_override,
                                 values, depth + 1, text));
      break;
    case YAML::NodeType::Map: {
      d->kind = Node::Kind::map;
      std::unordered_map<std::string, int> lines;  // key -> its line: a key given twice is named
      for (const auto& kv : y) {
        if (!kv.first.IsScalar())
          throw_at(location(file, d->line), path, "map keys must be plain strings");
        const std::string key = kv.first.Scalar();
        if (const auto first = lines.find(key); first != lines.end())
          throw_at(location(file, kv.first.Mark().line + 1), join_path(path, key),
                   "duplicate key (first given at line " + std::to_string(first->second) + ")");
        auto child =
            convert(kv.second, file, join_path(path, key), line_override, values, depth + 1, text);
        // An alias's place is its anchor's, before the key: what is written there is not its.
        if (kv.second.Mark().pos < kv.first.Mark().pos) child->alone.clear();
        // A block mapping or list starts on the line after its key: point at the key.
        if (line_override < 0 && kv.first.Mark().line >= 0) child->line = kv.first.Mark().line + 1;
        lines.emplace(key, child->line);
        d->map.emplace_back(key, child);
      }
      break;
    }
  }
  return d;
}

// `json`: the text is JSON (a DeepSpeed config), which may indent with tabs.
YAML::Node parse_text(const std::string& text, const std::string& source, bool json = false) {
  auto hex = [&](size_t at) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[at]));
    return std::string(byte);
  };
  // Checkpoints keep the config as JSON text, which must be UTF-8: found here, not at the
  // first save.
  if (const size_t bad = first_invalid_utf8(text); bad != std::string::npos)
    throw Error(place(text, bad, source) + ": byte " + hex(bad) +
                " is not UTF-8 text; zt reads configs as UTF-8 (and keeps them in every "
                "checkpoint): save the file as UTF-8");
  // Invisible, and left to the parser an error quoting a value that looks right ("expected a
  // number, got '0.1'") or naming an escape nobody wrote.
  if (const size_t bad = first_control(text); bad != std::string::npos) {
    const bool c1 = static_cast<unsigned char>(text[bad]) == 0xC2;
    throw Error(
        place(text, bad, source) + ": " +
        (c1 ? "bytes " + hex(bad) + " " + hex(bad + 1) + " are" : "byte " + hex(bad) + " is") +
        " a control character, which YAML does not allow (an invisible character "
        "from a copy and paste, or a damaged file?); delete it");
  }
  try {
    const std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (docs.size() > 1) {
      const int line = docs[1].Mark().line;
      throw Error(source + (line >= 0 ? ":" + std::to_string(line + 1) : std::string()) +
                  ": a second YAML document (after '---'); zt reads one configuration per "
                  "file: merge the documents or delete the separator");
    }
    return docs.empty() ? YAML::Node() : docs[0];
  } catch (const YAML::ParserException& e) {
    const std::string at = source + ":" + std::to_string(e.mark.line + 1) + ":" +
                           std::to_string(e.mark.column + 1) + ": " + (json ? "JSON" : "YAML") +
                           " parse error: " + e.msg;
    // YAML indents with spaces alone; a tab there makes a puzzling parse error.
    if (const int tab = json ? 0 : tab_indented_line(text, e.mark.line + 1))
      throw Error(source + ":" + std::to_string(tab) +
                  ": a tab in the indentation; YAML indents with spaces only (" + at + ")");
    throw Error(at);
  } catch (const YAML::Exception& e) {
    throw Error(source + ": YAML error: " + e.what());
  }
}

YAML::Node to_yaml(const NodeData& d) {
  switch (d.kind) {
    case Node::Kind::null:
      return YAML::Node(YAML::NodeType::Null);
    case Node::Kind::scalar:
      return YAML::Node(d.text);
    case Node::Kind::sequence: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const auto& c : d.seq) n.push_back(to_yaml(*c));
      return n;
    }
    case Node::Kind::map: {
      YAML::Node n(YAML::NodeType::Map);
      for (const auto& [k, c] : d.map) n[k] = to_yaml(*c);
      return n;
    }
  }
  return YAML::Node();
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Why a number is out of a double's range: its magnitude is past the largest (1.8e308) or,
// not 0, below the smallest (2.2e-308).
enum class Beyond { none, large, small };

// `raw` as a double in `out`; false when it is none, with *beyond (where given) telling a
// number written out whose magnitude no double holds.
bool parse_double(const std::string& raw, double& out, Beyond* beyond = nullptr) {
  std::string s = trim(raw);
  if (!s.empty() && s[0] == '+') s = s.substr(1);
  if (s == ".inf" || s == ".Inf") s = "inf";
  if (s == "-.inf" || s == "-.Inf") s = "-inf";
  if (s == ".nan" || s == ".NaN" || s == ".NAN") s = "nan";
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (beyond && ec == std::errc::result_out_of_range && p == s.data() + s.size()) {
    // Small: a negative exponent, or (written out) zeros before the first digit.
    const size_t e = s.find_first_of("eE"), dot = s.find('.');
    const bool small = e != std::string::npos
                           ? s[e + 1] == '-'
                           : dot != std::string::npos && s.find_first_of("123456789") > dot;
    *beyond = small ? Beyond::small : Beyond::large;
  }
  return ec == std::errc() && p == s.data() + s.size();
}

// The error for a number `text` whose magnitude no double holds.
std::string beyond_doubles(const std::string& text, Beyond beyond) {
  return "'" + text + "' is out of range: its magnitude is " +
         (beyond == Beyond::large ? "past the largest a double holds (1.8e308)"
                                  : "below the smallest a double holds (2.2e-308); write 0 for 0");
}

}  // namespace

// ---- Node

Node::Kind Node::kind() const {
  return data_of(d_).kind;
}
const std::string& Node::file() const {
  return data_of(d_).file;
}
int Node::line() const {
  return data_of(d_).line;
}
const std::string& Node::path() const {
  return data_of(d_).path;
}
std::string Node::where() const {
  return location(file(), line());
}

void Node::fail(const std::string& msg) const {
  if (!d_) throw Error("<config>: " + msg);
  throw_at(where(), path(), msg);
}

const std::string& Node::scalar() const {
  if (kind() != Kind::scalar)
    fail(std::string("expected a single value, got ") + (kind() == Kind::map        ? "a mapping"
                                                         : kind() == Kind::sequence ? "a list"
                                                         : d_->alone.empty()
                                                             ? "a null"
                                                             : "only " + d_->alone));
  return d_->text;
}

bool Node::as_bool() const {
  const std::string s = trim(scalar());
  for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "on", "On"})
    if (s == t) return true;
  for (const char* f : {"false", "False", "FALSE", "no", "No", "off", "Off"})
    if (s == f) return false;
  fail("expected true or false, got '" + s + "'");
}

int64_t Node::as_int() const {
  std::string s = trim(scalar());
  if (!s.empty() && s[0] == '+') s = s.substr(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && p == s.data() + s.size() && !s.empty()) return v;
  double dv = 0;
  Beyond beyond = Beyond::none;
  const bool whole = parse_double(s, dv, &beyond) && std::isfinite(dv) && dv == std::floor(dv);
  if (whole && std::fabs(dv) < 9.2e18) return static_cast<int64_t>(dv);
  if (whole || ec == std::errc::result_out_of_range || beyond == Beyond::large)
    fail("the integer '" + scalar() + "' is out of range (at most 9.2e18 in magnitude)");
  fail("expected an integer, got '" + scalar() + "'");
}

double Node::as_double() const {
  double v = 0;
  Beyond beyond = Beyond::none;
  if (!parse_double(scalar(), v, &beyond))
    fail(beyond != Beyond::none ? beyond_doubles(scalar(), beyond)
                                : "expected a number, got '" + scalar() + "'");
  if (std::isnan(v)) fail("expected a number, got '" + scalar() + "' (NaN: not a number)");
  return v;
}

std::string Node::as_string() const {
  return scalar();
}

std::vector<std::string> Node::keys() const {
  std::vector<std::string> out;
  if (kind() == Kind::null) return out;
  if (kind() != Kind::map) fail("expected a mapping (key: value lines)");
  for (const auto& [k, v] : d_->map) out.push_back(k);
  return out;
}

bool Node::has(const std::string& key) const {
  return static_cast<bool>(get(key));
}

Node Node::get(const std::string& key) const {
  if (kind() == Kind::null) return Node();
  if (kind() != Kind::map) fail("expected a mapping (key: value lines), looking up '" + key + "'");
  for (const auto& [k, v] : d_->map)
    if (k == key) return Node(v);
  return Node();
}

size_t Node::size() const {
  switch (kind()) {
    case Kind::sequence:
      return d_->seq.size();
    case Kind::map:
      return d_->map.size();
    case Kind::null:
      return 0;
    case Kind::scalar:
      break;
  }
  fail("expected a list or mapping, got a single value");
}

Node Node::at(size_t i) const {
  if (kind() != Kind::sequence) fail("expected a list");
  if (i >= d_->seq.size())
    fail("index " + std::to_string(i) + " out of range (list has " +
         std::to_string(d_->seq.size()) + " elements)");
  return Node(d_->seq[i]);
}

std::string Node::dump() const {
  YAML::Emitter e;
  e << to_yaml(data_of(d_));
  return e.c_str();
}

std::string yaml_quoted(const std::string& text) {
  YAML::Emitter e;
  e << YAML::DoubleQuoted << text;
  ZT_CHECK(e.good(), "yaml_quoted: '", text, "' cannot be written as YAML: ", e.GetLastError());
  return e.c_str();
}

// ---- loading

Node parse_yaml(const std::string& text, const std::string& source) {
  YAML::Node y = parse_text(text, source);
  int64_t values = 0;
  auto d = convert(y, source, "", -1, values, 0, &text);
  if (d->kind == Node::Kind::null || (d->kind == Node::Kind::map && d->map.empty()))
    throw Error(source +
                ": the config is empty (no keys: only blank lines, comments or {}); write the "
                "sections to use, e.g. start from a copy of configs/vqtok_tiny.yaml");
  if (d->kind != Node::Kind::map)
    throw_at(location(source, d->line), "", "the top level must be a mapping (key: value lines)");
  return Node(d);
}

Node parse_yaml_value(const std::string& text, const std::string& source, bool json) {
  int64_t values = 0;
  return Node(convert(parse_text(text, source, json), source, "", -1, values, 0, &text));
}

Override::Override(std::string assignment)
    : assignment(std::move(assignment)), source("--set " + this->assignment) {}
Override::Override(const char* assignment) : Override(std::string(assignment)) {}
Override::Override(std::string assignment, std::string source)
    : assignment(std::move(assignment)), source(std::move(source)) {}

std::string read_config_text(const std::string& path, const std::string& what,
                             const std::string& hint) {
  const std::string pass = hint.empty() ? "" : " " + hint;
  // A folder opens, and reads as if empty.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(what + " '" + path + "' is a folder; pass the file" + pass);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open " + what + " '" + path + "': " + std::strerror(errno) + pass);
  std::stringstream ss;
  ss << f.rdbuf();  // sets failbit on ss when there is nothing to read: an empty file is text too
  if (f.bad()) throw Error("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  return ss.str();
}

Node load_yaml_text(const std::string& text, const std::string& path,
                    const std::vector<Override>& overrides) {
  Node root = parse_yaml(text, path);
  for (const auto& o : overrides) apply_override(root, o);
  return root;
}

Node load_yaml_file(const std::string& path, const std::vector<Override>& overrides) {
  return load_yaml_text(
      read_config_text(path, "config file",
                       "(pass a path to a .yaml file, e.g. configs/vqtok_tiny.yaml)"),
      path, overrides);
}

namespace {

// True when YAML would read part of `value` as a comment: a '#' at its start or after a
// blank, outside quotes. On a command line nobody means one.
bool starts_comment(const std::string& value) {
  char quote = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#' && (i == 0 || value[i - 1] == ' ' || value[i - 1] == '\t')) {
      return true;
    }
  }
  return false;
}

// What YAML reads the first character of an override's `value` as, where a command line means
// text ("" for a character that starts a plain value).
std::string leading_indicator(const std::string& value) {
  const std::string v = trim(value);
  switch (v.empty() ? '\0' : v[0]) {
    case '%':
      return "'%' starts a directive";
    case '!':
      return "'!' starts a tag";
    case '&':
      return "'&' starts an anchor";
    case '*':
      return "'*' starts an alias";
    case '|':
    case '>':
      return std::string("'") + v[0] + "' starts a block of text on the lines below";
    case '@':
    case '`':
      return std::string("'") + v[0] + "' is reserved";
    default:
      return "";
  }
}

}  // namespace

void apply_override(const Node& root, const Override& o) {
  const std::string& assignment = o.assignment;
  const std::string& source = o.source;
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(source + ": expected key.path=value (e.g. --set train.lr=1e-3)");
  const std::string key_path = trim(assignment.substr(0, eq));
  if (key_path.empty())
    throw Error(source + ": expected key.path=value (e.g. --set train.lr=1e-3): the key is blank");
  if (key_path.front() == '.' || key_path.back() == '.')
    throw Error(source + ": empty component in key path '" + key_path + "'");
  const std::string value = assignment.substr(eq + 1);
  if (trim(value).empty()) throw Error(source + ": missing value after '='");
  if (starts_comment(value))
    throw Error(source + ": the value '" + value +
                "' holds a '#' after a blank, which starts a YAML comment and would drop the "
                "rest; quote the value (--set 'key=\"...\"')");

  std::vector<std::string> parts;
  std::stringstream ks(key_path);
  for (std::string part; std::getline(ks, part, '.');) {
    if (part.empty()) throw Error(source + ": empty component in key path '" + key_path + "'");
    parts.push_back(part);
  }

  // A value YAML reads as syntax ("%x" as a directive and no value) is said to be that.
  const std::string indicator = leading_indicator(value);
  const std::string quote_it =
      "to mean the text, quote it: --set '" + key_path + "=\"" + trim(value) + "\"'";
  auto fresh = [&](const std::string& path) {
    YAML::Node y;
    try {
      y = parse_text(value, source);
    } catch (const Error& e) {
      if (indicator.empty()) throw;
      throw Error(std::string(e.what()) + " (" + indicator + "; " + quote_it + ")");
    }
    int64_t values = 0;
    auto d = convert(y, source, path, 0, values);
    if (d->kind == Node::Kind::null && !indicator.empty())
      throw Error(source + ": the value '" + trim(value) + "' reads as no value in YAML (" +
                  indicator + "); " + quote_it);
    return d;
  };
  std::shared_ptr<NodeData> cur = root.data();
  ZT_CHECK(cur != nullptr, "apply_override on an absent root");
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    const std::string& part = parts[i];
    const std::string path = join_path(cur->path, part);
    if (cur->kind == Node::Kind::null) {
      cur->kind = Node::Kind::map;
      cur->file = source;
      cur->line = 0;
    }
    if (cur->kind == Node::Kind::map) {
      auto it = std::find_if(cur->map.begin(), cur->map.end(),
                             [&](const auto& kv) { return kv.first == part; });
      std::shared_ptr<NodeData> next;
      if (last) {
        next = fresh(path);
      } else if (it != cur->map.end()) {
        next = it->second;
      } else {
        next = std::make_shared<NodeData>();
        next->kind = Node::Kind::map;
        next->file = source;
        next->path = path;
      }
      if (it != cur->map.end()) {
        it->second = next;
      } else {
        cur->map.emplace_back(part, next);
      }
      cur = next;
    } else if (cur->kind == Node::Kind::sequence) {
      size_t idx = 0;
      auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), idx);
      if (ec != std::errc() || p != part.data() + part.size() || idx >= cur->seq.size())
        throw Error(source + ": '" + cur->path + "' is a list of " +
                    std::to_string(cur->seq.size()) + " elements; '" + part +
                    "' is not a valid index");
      if (last) cur->seq[idx] = fresh(path);
      cur = cur->seq[idx];
    } else {
      // Where that value was set: the file's line, or an earlier --set (the culprit then).
      const std::string set_by =
          cur->line > 0 ? cur->file + ":" + std::to_string(cur->line) : cur->file;
      throw Error(source + ": cannot set '" + key_path + "': '" + cur->path +
                  "' is a single value, not a mapping" +
                  (set_by.empty() ? std::string() : " (set by " + set_by + ")"));
    }
  }
}

}  // namespace zt::config
