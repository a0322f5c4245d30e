// Section: the strict reader that fills a struct from one mapping, and the edit
// distance behind its "did you mean" suggestions.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "configs/config.h"
#include "configs/node_data.h"

namespace zt::config {

using detail::join_path;
using detail::NodeData;
using detail::throw_at;

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {
// How far `given` is from name n: its edit distance, or one edit from a start of n.
size_t name_distance(const std::string& given, const std::string& n) {
  // A name begun and not finished ("images" for "image_folder", "avg" for "average") is
  // near the name it begins, though the rest of it makes the whole edit long.
  const size_t d = edit_distance(given, n);
  if (given.size() >= 3 && n.size() > given.size())
    return std::min(d, 1 + edit_distance(given, n.substr(0, given.size())));
  return d;
}
}  // namespace

std::string nearest_name(const std::string& given, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& n : names)
    if (const size_t d = name_distance(given, n); d < best_d) best_d = d, best = n;
  return best;
}

std::string close_name(const std::string& given, const std::vector<std::string>& names) {
  const std::string best = nearest_name(given, names);
  // A third of the letters of the shorter of the two: the distance to a start of a long
  // name is counted over `given`'s letters ('xyz' is 3 edits from 'sync_batchnorm', not
  // near it though 3 is a third of 14).
  const size_t letters = std::min(given.size(), best.size());
  return !best.empty() && name_distance(given, best) <= std::max<size_t>(2, letters / 3) ? best
                                                                                         : "";
}

// ---- Section

Section::Section(Node node) : node_(std::move(node)) {
  if (node_ && !node_.is_null() && !node_.is_map())
    node_.fail("expected a mapping (key: value lines)");
}

Node Section::take(const std::string& key) {
  known_->push_back(key);
  if (!node_ || node_.is_null()) return Node();
  Node n = node_.get(key);
  if (!n) return Node();
  if (n.is_null()) {
    const std::string& alone = n.data()->alone;  // "lr: !!float": only a tag
    n.fail("the key has no value" + (alone.empty() ? "" : ", only " + alone) + "; give one (" +
           key + ": ...) or delete the line to keep the default");
  }
  return n;
}

Node Section::take_or_null(const std::string& key) {
  if (node_ && node_.is_map())
    if (Node n = node_.get(key); n && n.is_null() && n.data()->alone.empty()) {
      known_->push_back(key);
      return Node();
    }
  return take(key);
}

bool Section::has(const std::string& key) {
  return static_cast<bool>(take(key));
}

void Section::fail(const std::string& key, const std::string& msg) const {
  if (node_) {
    Node n = node_.is_map() ? node_.get(key) : Node();
    if (n) n.fail(msg);
    throw_at(node_.where(), join_path(node_.path(), key), msg);
  }
  throw_at("", key, msg);
}

void Section::fail_element(const std::string& key, size_t index, const std::string& msg) const {
  const Node n = node_ && node_.is_map() ? node_.get(key) : Node();
  if (n && n.is_sequence() && index < n.size()) n.at(index).fail(msg);
  fail(key, msg);
}

Section& Section::get(const std::string& key, int64_t& out, int64_t lo, int64_t hi) {
  if (Node n = take(key)) {
    const int64_t v = n.as_int();
    if (v < lo || v > hi) {
      n.fail(std::to_string(v) + " is out of range: must be " +
             (hi == std::numeric_limits<int64_t>::max()
                  ? ">= " + std::to_string(lo)
                  : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
    }
    out = v;
  }
  return *this;
}

Section& Section::get(const std::string& key, int& out, int64_t lo, int64_t hi) {
  int64_t v = out;
  get(key, v, lo, std::min<int64_t>(hi, std::numeric_limits<int>::max()));
  out = static_cast<int>(v);
  return *this;
}

Section& Section::get(const std::string& key, double& out, double lo, double hi) {
  if (Node n = take(key)) {
    const double v = n.as_double();
    if (!(v >= lo && v <= hi)) {
      std::ostringstream os;
      os << n.scalar() << " is out of range: must be ";
      if (hi == std::numeric_limits<double>::max())
        os << ">= " << lo << " and finite";
      else
        os << "in [" << lo << ", " << hi << "]";
      n.fail(os.str());
    }
    out = v;
  }
  return *this;
}

Section& Section::get(const std::string& key, std::vector<int64_t>& out, int64_t lo, int64_t hi) {
  if (Node n = take(key)) {
    if (!n.is_sequence()) n.fail("expected a list of integers, e.g. [1, 2]");
    std::vector<int64_t> v;
    for (size_t i = 0; i < n.size(); ++i) {
      Node e = n.at(i);
      const int64_t x = e.as_int();
      if (x < lo || x > hi)
        e.fail(
            std::to_string(x) + " is out of range: must be in [" + std::to_string(lo) + ", " +
            (hi == std::numeric_limits<int64_t>::max() ? std::string("inf") : std::to_string(hi)) +
            "]");
      v.push_back(x);
    }
    out = std::move(v);
  }
  return *this;
}

Section& Section::get_enum(const std::string& key, std::string& out,
                           const std::vector<std::string>& allowed) {
  if (Node n = take(key)) {
    const std::string v = n.as_string();
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      // A suggestion only where one is near: 'foo' is no misspelled 'npy'.
      const std::string near = close_name(v, allowed);
      n.fail("'" + v + "' is not one of: " + list +
             (near.empty() ? "" : " (did you mean '" + near + "'?)"));
    }
    out = v;
  }
  return *this;
}

void Section::suggest_elsewhere(Elsewhere elsewhere) {
  elsewhere_ = std::make_shared<const Elsewhere>(std::move(elsewhere));
}

Section Section::sub(const std::string& key) {
  Node n = take(key);
  if (!n) {
    // An absent section reads as empty but keeps a location for its errors.
    auto d = std::make_shared<NodeData>();
    if (node_) {
      d->file = node_.file();
      d->line = node_.line();
      d->path = join_path(node_.path(), key);
    } else {
      d->file = "<config>";
      d->path = key;
    }
    n = Node(d);
  }
  Section s(n);
  s.elsewhere_ = elsewhere_;
  return s;
}

Node Section::raw(const std::string& key) {
  return take(key);
}

void Section::finish() const {
  if (!node_ || !node_.is_map()) return;
  for (const auto& key : node_.keys()) {
    if (std::find(known_->begin(), known_->end(), key) != known_->end()) continue;
    Node n = node_.get(key);
    if (key == "<<")
      n.fail(
          "YAML merge keys (<<: *anchor) are not supported; write the keys out (an anchor "
          "may still stand for a whole value: key: *anchor)");
    if (known_->empty()) n.fail("unknown key; '" + node_.path() + "' takes no keys");
    if (const std::vector<std::string> there =
            elsewhere_ ? (*elsewhere_)(key) : std::vector<std::string>{};
        !there.empty()) {
      std::string paths;
      for (const std::string& p : there) paths += (paths.empty() ? "'" : " or '") + p + "'";
      n.fail("unknown key here; it belongs in another section: did you mean " + paths + "?");
    }
    if (const std::string near = close_name(key, *known_); !near.empty())
      n.fail("unknown key; did you mean '" + join_path(node_.path(), near) + "'?");
    std::string keys;  // none is near: what the section takes
    for (const std::string& k : *known_) keys += (keys.empty() ? "" : ", ") + k;
    n.fail("unknown key; " + (node_.path().empty() ? "the top level" : "'" + node_.path() + "'") +
           " takes " + keys);
  }
}

}  // namespace zt::config
