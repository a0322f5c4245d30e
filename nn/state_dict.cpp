// state_dict / load_state_dict. Validation runs over the whole dict before any copy so a
// failed load leaves the model untouched and the error lists every problem at once.
#include "nn/state_dict.h"

#include <cstring>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

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

NamedTensors unique_state_dict(const Module& m) {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [n, t] : state_dict(m))
    if (seen.insert(t.impl()).second) out.emplace_back(n, t);
  return out;
}

NamedTensors persistent_buffers(const Module& m) {
  std::unordered_set<std::string> kept;
  for (auto& [n, t] : state_dict(m)) kept.insert(n);
  NamedTensors out;
  for (auto& [n, b] : m.named_buffers())
    if (kept.count(n)) out.emplace_back(n, b);
  return out;
}

bool may_be_missing(const Module& m, const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return m.state_entry_optional(name);
  const std::shared_ptr<Module> owner = m.find(name.substr(0, dot));
  return owner && owner->state_entry_optional(name.substr(dot + 1));
}

std::unordered_map<const TensorImpl*, std::vector<std::string>> names_by_tensor(const Module& m) {
  std::unordered_map<const TensorImpl*, std::vector<std::string>> out;
  for (auto& [n, t] : state_dict(m)) out[t.impl()].push_back(n);
  return out;
}

// Whether a and b (of one shape) hold the same values: bit for bit where they share a
// dtype (so a NaN equals itself), else compared as doubles.
static bool same_values(const Tensor& a, const Tensor& b) {
  if (a.same(b) || a.numel() == 0) return true;
  if (a.dtype() == b.dtype()) {
    const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
    return std::memcmp(x.data_ptr(), y.data_ptr(),
                       static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
  }
  return max(abs(sub(a.to(DType::f64), b.to(DType::f64)))).item() == 0.0;
}

NamedTensors fold_tied_names(const Module& m, const NamedTensors& dict,
                             std::vector<std::string>& problems,
                             std::vector<std::string>* given_as_out) {
  std::unordered_map<std::string, std::string> first_of;  // every name -> its tensor's first
  for (auto& [impl, names] : names_by_tensor(m))
    for (const std::string& n : names) first_of.emplace(n, names.front());
  NamedTensors out;
  std::vector<std::string> given_as;           // the name each entry of `out` came under
  std::unordered_map<std::string, size_t> at;  // a tensor's first name -> its entry in `out`
  for (const auto& [k, t] : dict) {
    auto f = first_of.find(k);
    if (f == first_of.end()) {  // unknown: the caller's to judge
      out.emplace_back(k, t);
      given_as.push_back(k);
      continue;
    }
    auto [it, fresh] = at.emplace(f->second, out.size());
    if (fresh) {
      out.emplace_back(f->second, t);
      given_as.push_back(k);
      continue;
    }
    // An undefined entry (the caller judges one left alone) gives way to a defined one.
    Tensor& other = out[it->second].second;
    if (!other.defined()) {
      other = t;
      given_as[it->second] = k;
      continue;
    }
    if (!t.defined()) continue;
    const std::string& other_name = given_as[it->second];
    if (other.sizes() != t.sizes())
      problems.push_back(k + " " + shape_str(t.sizes()) + " but " + other_name + " " +
                         shape_str(other.sizes()) + " (one tied tensor)");
    else if (!same_values(other, t))
      problems.push_back(other_name + " and " + k + " hold different values for one tied tensor");
  }
  if (given_as_out) *given_as_out = std::move(given_as);
  return out;
}

std::string name_as_given(const std::string& first, const std::string& given,
                          const std::string& detail) {
  const std::string tie = given == first ? "" : "tied to " + first;
  const std::string both = !tie.empty() && !detail.empty() ? "; " : "";
  return given + (tie.empty() && detail.empty() ? "" : " (" + tie + both + detail + ")");
}

LoadResult load_state_dict(Module& m, const NamedTensors& dict_in, bool strict) {
  const NamedTensors own = unique_state_dict(m);
  std::vector<std::string> duplicates, tied;
  {
    std::unordered_set<std::string> names;
    for (const auto& [n, t] : dict_in)
      if (!names.insert(n).second) duplicates.push_back(n);
  }
  std::vector<std::string> given_as;
  const NamedTensors dict = fold_tied_names(m, dict_in, tied, &given_as);
  std::unordered_map<std::string, const Tensor*> given;
  std::unordered_map<std::string, std::string> given_name;  // a first name -> the dict's name
  for (size_t i = 0; i < dict.size(); ++i) {
    given.emplace(dict[i].first, &dict[i].second);
    given_name.emplace(dict[i].first, given_as[i]);
  }
  auto named = [&](const std::string& n, const std::string& detail) {
    return name_as_given(n, given_name.at(n), detail);
  };

  LoadResult r;
  std::vector<std::string> mismatched, undefined, kinds;
  std::unordered_map<std::string, bool> known;
  for (const auto& [n, t] : own) {
    known[n] = true;
    auto it = given.find(n);
    if (it == given.end()) {
      if (!may_be_missing(m, n)) r.missing_keys.push_back(n);
    } else if (!it->second->defined()) {
      undefined.push_back(named(n, ""));
    } else if (it->second->sizes() != t.sizes()) {
      mismatched.push_back(named(
          n, "checkpoint " + shape_str(it->second->sizes()) + ", model " + shape_str(t.sizes())));
    } else if (!same_dtype_kind(it->second->dtype(), t.dtype())) {
      kinds.push_back(named(n, std::string("checkpoint ") + dtype_name(it->second->dtype()) +
                                   ", model " + dtype_name(t.dtype())));
    }
  }
  for (const auto& [n, t] : dict)
    if (!known.count(n)) r.unexpected_keys.push_back(n);

  std::ostringstream err;
  if (!duplicates.empty()) err << "\n  duplicate keys: " << list_names(duplicates);
  if (!tied.empty()) err << "\n  " << list_names(tied);
  if (!undefined.empty()) err << "\n  undefined tensors: " << list_names(undefined);
  if (!mismatched.empty()) err << "\n  shape mismatches: " << list_names(mismatched);
  if (!kinds.empty()) err << "\n  wrong kinds of dtype: " << list_names(kinds);
  if (strict && !r.missing_keys.empty())
    err << "\n  missing keys (" << r.missing_keys.size() << "): " << list_names(r.missing_keys);
  if (strict && !r.unexpected_keys.empty())
    err << "\n  unexpected keys (" << r.unexpected_keys.size()
        << "): " << list_names(r.unexpected_keys);
  // The hint only where strict=false helps: it lets keys be missing or unexpected, never
  // any of the other problems.
  const bool only_keys = duplicates.empty() && tied.empty() && undefined.empty() &&
                         mismatched.empty() && kinds.empty();
  ZT_CHECK(err.str().empty(), "load_state_dict into ", m.type_name(), " failed:", err.str(),
           strict && only_keys
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
