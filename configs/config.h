// A yaml-free configuration tree and a strict reader that fills plain structs.
//
// load_yaml_file() parses YAML (yaml-cpp stays inside config.cpp), applies `--set
// key.path=value` overrides, and returns a Node tree in which every node knows its
// source file, line and dotted key path. A Section reads one mapping into a struct:
// each get() names a valid key (missing keys keep the struct's default), wrong types
// and out-of-range values are errors, and finish() rejects every key nobody asked
// for, suggesting the nearest valid one. All errors read "file:line: key.path: message".
#pragma once

// zero/ and data/ sit below configs/: their libraries compile with ZT_BELOW_CONFIGS, so
// including a configs/ header there fails the build instead of turning the layering around.
#ifdef ZT_BELOW_CONFIGS
#error \
    "zero/ and data/ must not include configs/: take a plain struct (zero/config.h, data/data_config.h) and let configs/ fill it"
#endif

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace zt::config {

namespace detail {
struct NodeData;
}

/// A handle to one node of a configuration tree (shared; copies alias the same node).
/// A default-constructed Node is "absent" (a key that is not there).
class Node {
 public:
  enum class Kind { null, scalar, sequence, map };

  Node() = default;
  explicit Node(std::shared_ptr<detail::NodeData> d) : d_(std::move(d)) {}

  /// False for an absent node (a missing key).
  explicit operator bool() const { return d_ != nullptr; }
  Kind kind() const;
  bool is_null() const { return d_ && kind() == Kind::null; }
  bool is_scalar() const { return d_ && kind() == Kind::scalar; }
  bool is_sequence() const { return d_ && kind() == Kind::sequence; }
  bool is_map() const { return d_ && kind() == Kind::map; }

  /// Source file (or "--set key=value" for an override), 1-based line (0: unknown).
  const std::string& file() const;
  int line() const;
  /// Dotted key path from the root ("train.lr", "model.ch_mult.2"); "" for the root.
  const std::string& path() const;
  /// "file:line" (or just the file when the line is unknown).
  std::string where() const;

  /// The scalar's text as written; error unless a scalar.
  const std::string& scalar() const;
  bool as_bool() const;
  /// Integers; "5e8" is accepted when it is an exact integer.
  int64_t as_int() const;
  double as_double() const;
  std::string as_string() const;
  /// as_bool / as_int / as_double / as_string / std::vector of those, by type.
  template <typename T>
  T as() const;

  /// Map: keys in file order. Error unless a map (a null node has no keys).
  std::vector<std::string> keys() const;
  bool has(const std::string& key) const;
  /// Map: the child for `key`, or an absent Node.
  Node get(const std::string& key) const;
  Node operator[](const std::string& key) const { return get(key); }
  /// Sequence or map: number of children (0 for null).
  size_t size() const;
  /// Sequence: the i-th element.
  Node at(size_t i) const;

  /// The subtree as YAML text (for logs and checkpoint metadata).
  std::string dump() const;

  /// Throws zt::Error "file:line: path: msg" located at this node.
  [[noreturn]] void fail(const std::string& msg) const;

  const std::shared_ptr<detail::NodeData>& data() const { return d_; }

 private:
  std::shared_ptr<detail::NodeData> d_;
};

/// `text` as a YAML scalar that reads back as exactly `text` (a double-quoted scalar, written
/// by yaml-cpp's emitter): for a path put into YAML text or a key.path=value override.
std::string yaml_quoted(const std::string& text);

/// Parses YAML text; `source` names it in errors. An empty or comment-only document is
/// an error (it would otherwise train silently with every default).
Node parse_yaml(const std::string& text, const std::string& source = "<string>");
/// Parses one YAML value (an override's, or a document that need not be a zt config): any
/// node, a null or an empty mapping included; `source` names it in errors. `json`: the text
/// is JSON (a DeepSpeed config), whose parse errors are named as JSON's and never blamed on
/// tabs (JSON may indent with them).
Node parse_yaml_value(const std::string& text, const std::string& source = "<string>",
                      bool json = false);
/// One "key.path=value" override and what the user typed for it, which errors and
/// warnings name: "--set key.path=value", or the shortcut that gave it ("--steps 5").
struct Override {
  Override(std::string assignment);  // NOLINT(google-explicit-constructor): a --set string
  Override(const char* assignment);  // NOLINT(google-explicit-constructor)
  Override(std::string assignment, std::string source);

  std::string assignment;
  std::string source;
};

/// The text of the file at `path`, read once from its start to its end, so a FIFO, a shell's
/// process substitution or /dev/stdin works too; an error naming it as `what` ("config file")
/// if it is a folder or does not open (`hint` then says what to pass) or read.
std::string read_config_text(const std::string& path, const std::string& what,
                             const std::string& hint = "");
/// Parses a YAML file (read_config_text) and applies "key.path=value" overrides (values are
/// YAML, so "model.ch_mult=[1,2]" works). A missing or malformed file is an error naming it.
Node load_yaml_file(const std::string& path, const std::vector<Override>& overrides = {});
/// load_yaml_file of a file's `text` (read_config_text), whose messages name `path`.
Node load_yaml_text(const std::string& text, const std::string& path,
                    const std::vector<Override>& overrides = {});
/// Applies one "key.path=value" override to the tree, creating missing maps; the new
/// node is located at the override's source so a later validation error names it.
void apply_override(const Node& root, const Override& o);

/// Levenshtein distance (for "did you mean" suggestions).
size_t edit_distance(const std::string& a, const std::string& b);
/// The name of `names` nearest to `given` by edit_distance, where a longer name counts as
/// one edit from a start of it (the first of equally near ones), however far; "" when
/// `names` is empty.
std::string nearest_name(const std::string& given, const std::vector<std::string>& names);
/// nearest_name() when it is close (two edits, or for long names a third of the letters of
/// the shorter of `given` and it), else "": a "did you mean" that helps.
std::string close_name(const std::string& given, const std::vector<std::string>& names);

/// The name `names` spells `value` by (the table Section::get_enum reads it with), "?"
/// where none does.
template <typename E>
const char* enum_name(const std::vector<std::pair<std::string, E>>& names, E value) {
  for (const auto& [name, v] : names)
    if (v == value) return name.c_str();
  return "?";
}

/// Strict reader of one mapping node into a struct. Every get*() declares a valid key;
/// finish() fails on any key present but never declared.
class Section {
 public:
  /// `node` must be a map; an absent or null node reads as an empty map.
  explicit Section(Node node);

  const Node& node() const { return node_; }
  /// Declares `key` valid and says whether it is present (error if given without a value).
  bool has(const std::string& key);

  /// Reads bool, int, int64_t, double, std::string or a std::vector of those.
  template <typename T>
  Section& get(const std::string& key, T& out) {
    if (Node n = take(key)) out = n.template as<T>();
    return *this;
  }
  /// Integer in [lo, hi].
  Section& get(const std::string& key, int64_t& out, int64_t lo,
               int64_t hi = std::numeric_limits<int64_t>::max());
  Section& get(const std::string& key, int& out, int64_t lo,
               int64_t hi = std::numeric_limits<int>::max());
  /// Real in [lo, hi]; finite (no key takes an infinity: .inf is an error, as .nan is).
  Section& get(const std::string& key, double& out, double lo,
               double hi = std::numeric_limits<double>::max());
  /// Every element in [lo, hi].
  Section& get(const std::string& key, std::vector<int64_t>& out, int64_t lo,
               int64_t hi = std::numeric_limits<int64_t>::max());
  /// A string that must be one of `allowed`.
  Section& get_enum(const std::string& key, std::string& out,
                    const std::vector<std::string>& allowed);
  /// An enum spelled by one of `names`.
  template <typename E>
  Section& get_enum(const std::string& key, E& out,
                    const std::vector<std::pair<std::string, E>>& names) {
    std::vector<std::string> allowed;
    for (const auto& [name, value] : names) allowed.push_back(name);
    std::string s;
    for (const auto& [name, value] : names)
      if (value == out) s = name;
    get_enum(key, s, allowed);
    for (const auto& [name, value] : names)
      if (name == s) out = value;
    return *this;
  }

  /// The child mapping `key` as a Section (call its finish()); absent reads as empty.
  Section sub(const std::string& key);
  /// The raw subtree at `key` (absent Node if missing), for a consumer that validates it.
  Node raw(const std::string& key);

  /// Names the full paths of a key that belongs in other sections ("train.lr" for "lr").
  using Elsewhere = std::function<std::vector<std::string>(const std::string& key)>;
  /// Fails on the first key present but never declared: "file:line: path: unknown key;
  /// did you mean 'nearest'?". Where suggest_elsewhere was called on this section or on the
  /// section it is a sub() of, the sections a key belongs in are said instead.
  void finish() const;
  /// Sets the finish() suggestion of this section and of the sub()s taken from it after.
  void suggest_elsewhere(Elsewhere elsewhere);
  /// The keys declared so far (shared by copies, so a reader's declarations show here).
  const std::vector<std::string>& known() const { return *known_; }
  /// Throws at `key`'s location (or the section's when the key is absent).
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;
  /// Throws at element `index` of the list `key`: where that element was set (its file's
  /// line, or the `--set key.index=value` that set it alone), at path "key.index"; as
  /// fail() when `key` holds no such element.
  [[noreturn]] void fail_element(const std::string& key, size_t index,
                                 const std::string& msg) const;
  /// The node at `key` (declares it valid); absent gives an absent Node. A key written
  /// without a value (`lr:`) is an error naming it, never a silent default.
  Node take(const std::string& key);
  /// As take(), but a null value reads as absent: DeepSpeed's documented defaults write
  /// `null` for "unset" (activation_checkpointing.number_checkpoints).
  Node take_or_null(const std::string& key);

 private:
  Node node_;
  std::shared_ptr<std::vector<std::string>> known_ = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<const Elsewhere> elsewhere_;
};

// ---- template definitions

template <typename T>
T Node::as() const {
  if constexpr (std::is_same_v<T, bool>) {
    return as_bool();
  } else if constexpr (std::is_same_v<T, std::string>) {
    return as_string();
  } else if constexpr (std::is_integral_v<T>) {
    const int64_t v = as_int();
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        v > static_cast<int64_t>(std::numeric_limits<T>::max()))
      fail("integer " + std::to_string(v) + " is out of range for this key");
    return static_cast<T>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(as_double());
  } else {
    // std::vector<E>
    using E = typename T::value_type;
    if (!is_sequence())
      fail(std::is_same_v<E, std::string> ? "expected a list, e.g. [a, b]"
                                          : "expected a list, e.g. [1, 2]");
    T out;
    for (size_t i = 0; i < size(); ++i) out.push_back(at(i).template as<E>());
    return out;
  }
}

}  // namespace zt::config
