// State dicts: a module's parameters and persistent buffers by dotted name, and loading
// values back into the existing tensors in place (copy_), so tensor handles held by an
// engine or optimizer stay valid.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace zt::nn {

using ::zt::NamedTensors;

/// Parameters and persistent buffers with dotted names, in PyTorch's order: each module's
/// own parameters, then its own buffers, then its children in registration order. The
/// tensors are the module's own (not copies).
NamedTensors state_dict(const Module& m);

/// state_dict(m) with each tensor once, under its first name (a tied tensor, registered
/// under several names, is listed by the first).
NamedTensors unique_state_dict(const Module& m);
/// m.named_buffers() without the non-persistent ones (those state_dict leaves out): the
/// buffers a checkpoint keeps, each once. A non-persistent buffer (a mask, a cache) is
/// rebuilt with the model, so a resumed run keeps the rebuilt value.
NamedTensors persistent_buffers(const Module& m);
/// True when the dotted `name` of m's state is one its module lets a load go without
/// (Module::state_entry_optional): then not a missing key.
bool may_be_missing(const Module& m, const std::string& name);

/// True when a and b are both floating, both integer, or both bool: the kinds within which
/// a loaded value converts to a model's type (an integer tensor's bits are no float's).
inline bool same_dtype_kind(DType a, DType b) {
  return is_floating(a) == is_floating(b) && (a == DType::b8) == (b == DType::b8);
}
/// Every name state_dict(m) gives each tensor, the first name first.
std::unordered_map<const TensorImpl*, std::vector<std::string>> names_by_tensor(const Module& m);
/// `dict` with each tied tensor's entries under its first name: a dict that kept another
/// of its names (a file that saved one) stands in for the first. Two entries for one
/// tensor must agree in shape and values; each disagreement is added to `problems`.
/// `given_as`, when not null, receives per entry of the result the name the dict gave it.
NamedTensors fold_tied_names(const Module& m, const NamedTensors& dict,
                             std::vector<std::string>& problems,
                             std::vector<std::string>* given_as = nullptr);
/// A folded entry's problem, named as the dict gave it: `first` (the model's first name)
/// given as `given` with `detail` reads "1.weight (tied to 0.weight; <detail>)", and as
/// "0.weight (<detail>)" when the dict gave the first name.
std::string name_as_given(const std::string& first, const std::string& given,
                          const std::string& detail);

/// What a non-strict load skipped.
struct LoadResult {
  std::vector<std::string> missing_keys;     // in the model, absent from the dict
  std::vector<std::string> unexpected_keys;  // in the dict, absent from the model
};

/// Copies each entry into the model's tensor of the same name (casting dtype, across
/// devices); a tied tensor takes the entry of any of its names (fold_tied_names). Shape
/// mismatches are always an error; with `strict`, missing and unexpected keys are too. All problems
/// are reported together, by name, in one error, and nothing is copied unless the load is valid.
LoadResult load_state_dict(Module& m, const NamedTensors& dict, bool strict = true);
LoadResult load_state_dict(Module& m, const std::map<std::string, Tensor>& dict,
                           bool strict = true);

}  // namespace zt::nn
