// state_dict / load_state_dict. Validation runs over the whole dict before any copy so a
// failed load leaves the model untouched and the error lists every problem at once.
#include "nn/state_dict.h"

#include <sstream>
#include <unordered_map>

namespace zt::nn {

static void collect(const Module& m, const std::string& prefix, NamedTensors& out) {
  for (const auto& [n, t] : m.local_parameters())
    if (t.defined()) out.emplace_back(prefix + n, t);
  for (const auto& [n, t] : m.local_buffers())
    if (t.defined() && m.buffer_is_persistent(n)) out.emplace_back(prefix + n, t);
  for (const auto& [n, c] : m.named_children()) collect(*c, prefix + n + ".", out);
}

NamedTensors state_dict(const Module& m) {
  NamedTensors out;
  collect(m, "", out);
  return out;
}

LoadResult load_state_dict(Module& m, const NamedTensors& dict, bool strict) {
  NamedTensors own = state_dict(m);
  std::unordered_map<std::string, const Tensor*> given;
  std::vector<std::string> duplicates;
  for (const auto& [n, t] : dict)
    if (!given.emplace(n, &t).second) duplicates.push_back(n);

  LoadResult r;
  std::vector<std::string> mismatched, undefined;
  std::unordered_map<std::string, bool> known;
  for (const auto& [n, t] : own) {
    known[n] = true;
    auto it = given.find(n);
    if (it == given.end()) {
      r.missing_keys.push_back(n);
    } else if (!it->second->defined()) {
      undefined.push_back(n);
    } else if (it->second->sizes() != t.sizes()) {
      mismatched.push_back(n + " (checkpoint " + shape_str(it->second->sizes()) + ", model " +
                           shape_str(t.sizes()) + ")");
    }
  }
  for (const auto& [n, t] : dict)
    if (!known.count(n)) r.unexpected_keys.push_back(n);

  std::ostringstream err;
  if (!duplicates.empty()) err << "\n  duplicate keys: " << list_names(duplicates);
  if (!undefined.empty()) err << "\n  undefined tensors: " << list_names(undefined);
  if (!mismatched.empty()) err << "\n  shape mismatches: " << list_names(mismatched);
  if (strict && !r.missing_keys.empty())
    err << "\n  missing keys (" << r.missing_keys.size() << "): " << list_names(r.missing_keys);
  if (strict && !r.unexpected_keys.empty())
    err << "\n  unexpected keys (" << r.unexpected_keys.size()
        << "): " << list_names(r.unexpected_keys);
  ZT_CHECK(err.str().empty(), "load_state_dict into ", m.type_name(), " failed:", err.str(),
           strict
               ? "\n  (pass strict=false to load a subset and get the missing/unexpected keys back)"
               : "");

  autograd::NoGradGuard ng;
  for (const auto& [n, t] : own) {
    auto it = given.find(n);
    if (it != given.end()) t.copy_(*it->second);
  }
  return r;
}

LoadResult load_state_dict(Module& m, const std::map<std::string, Tensor>& dict, bool strict) {
  return load_state_dict(m, NamedTensors(dict.begin(), dict.end()), strict);
}

}  // namespace zt::nn
