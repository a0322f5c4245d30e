// Containers: Sequential (calls its children in order), ModuleList and ModuleDict
// (hold children under index / key names; not callable themselves).
#pragma once

#include <initializer_list>

#include "nn/module.h"

namespace zt::nn {

/// Children kept in order, named by their index ("0", "1", ...) unless named explicitly:
/// what Sequential and ModuleList share (size, indexing, typed access, iteration).
class IndexedModules : public Module {
 public:
  size_t size() const { return modules_.size(); }
  /// Child i (an error naming the container and its size when out of range).
  const std::shared_ptr<Module>& operator[](size_t i) const;
  /// Child i cast to M (error if it is not an M).
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    ZT_CHECK(p != nullptr, type_name(), ": child ", i, " is a ", (*this)[i]->type_name());
    return p;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 protected:
  explicit IndexedModules(std::string type_name) : Module(std::move(type_name)) {}
  /// Registers `m` as child `name` and appends it.
  void append(const std::string& name, std::shared_ptr<Module> m);
  const std::vector<std::shared_ptr<Module>>& modules() const { return modules_; }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

/// Children named "0", "1", ...; call() chains them, each through its own call() (hooks).
class Sequential : public IndexedModules {
 public:
  Sequential() : IndexedModules("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  /// Appends a child named by its index.
  void push_back(std::shared_ptr<Module> m);
  /// Appends a child under an explicit name.
  void push_back(const std::string& name, std::shared_ptr<Module> m);

 protected:
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

/// An indexed list of children named "0", "1", ... (iterate, index, append).
class ModuleList : public IndexedModules {
 public:
  ModuleList() : IndexedModules("ModuleList") {}
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  /// Appends a child named by its index.
  void push_back(std::shared_ptr<Module> m);

 protected:
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

/// Children under string keys, in insertion order.
class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}
  void insert(const std::string& key, std::shared_ptr<Module> m);
  bool contains(const std::string& key) const;
  /// The child under key (error naming the known keys if absent).
  std::shared_ptr<Module> operator[](const std::string& key) const;
  std::vector<std::string> keys() const;
  size_t size() const { return named_children().size(); }

 protected:
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

}  // namespace zt::nn
