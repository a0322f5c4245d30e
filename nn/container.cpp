// Sequential, ModuleList and ModuleDict.
#include "nn/container.h"

namespace zt::nn {

const std::shared_ptr<Module>& IndexedModules::operator[](size_t i) const {
  ZT_CHECK(i < modules_.size(), type_name(), ": index ", i, " out of range (size ", modules_.size(),
           ")");
  return modules_[i];
}

void IndexedModules::append(const std::string& name, std::shared_ptr<Module> m) {
  register_module(name, m);
  modules_.push_back(std::move(m));
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules)
    : IndexedModules("Sequential") {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  append(std::to_string(size()), std::move(m));
}

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> m) {
  append(name, std::move(m));
}

std::vector<Tensor> Sequential::forward(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> x = inputs;
  for (const auto& m : modules()) x = m->call(std::move(x));
  return x;
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules)
    : IndexedModules("ModuleList") {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  append(std::to_string(size()), std::move(m));
}

std::vector<Tensor> ModuleList::forward(const std::vector<Tensor>&) {
  ZT_FAIL("ModuleList is not callable: call its elements (list[i]->call(...))");
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> m) {
  register_module(key, std::move(m));
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [n, c] : named_children())
    if (n == key) return true;
  return false;
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  for (const auto& [n, c] : named_children())
    if (n == key) return c;
  ZT_FAIL("ModuleDict: no key '", key, "' (keys: ", list_names(keys()), ")");
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [n, c] : named_children()) out.push_back(n);
  return out;
}

std::vector<Tensor> ModuleDict::forward(const std::vector<Tensor>&) {
  ZT_FAIL("ModuleDict is not callable: call its elements (dict[key]->call(...))");
}

}  // namespace zt::nn
