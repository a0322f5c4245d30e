// Module: the base of every layer, as libtorch users know it. Parameters, buffers and
// children are named and ordered; names compose into dotted paths
// ("encoder.down.0.block.1.conv1.weight"). Every call goes through one entry point,
// call(), which runs the pre-forward hooks (they may replace the inputs), forward(),
// then the post-forward hooks (they may replace the outputs): that is how the ZeRO
// engine gathers and releases parameters from outside without nn knowing about it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/ops.h"

namespace zt::nn {

class Module;

/// Observes registrations on this thread (a zero::Init scope partitions parameters as
/// they are registered). Observers stack; the innermost (last pushed) is asked first and
/// decides alone.
class RegistrationObserver {
 public:
  virtual ~RegistrationObserver() = default;
  /// Called after `param` was registered as `name` on `owner`.
  virtual void on_parameter(Module& owner, const std::string& name, const Tensor& param) = 0;
  /// Called after `buffer` was registered as `name` on `owner`.
  virtual void on_buffer(Module& owner, const std::string& name, const Tensor& buffer) = 0;
};
/// Pushes/pops a registration observer for this thread (used by RAII scopes).
void push_registration_observer(RegistrationObserver* o);
void pop_registration_observer(RegistrationObserver* o);
/// Parameters, buffers and child modules registered (or replaced) so far, process-wide:
/// a model whose owner saw this count unchanged has not changed shape.
uint64_t registration_count();
/// The innermost observer on this thread, or null.
RegistrationObserver* current_registration_observer();

using PreForwardHook = std::function<void(Module&, std::vector<Tensor>& inputs)>;
using PostForwardHook =
    std::function<void(Module&, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs)>;
/// Runs when a call() fails (forward() or a hook threw), before the error goes on: what a
/// pre-forward hook set up and its post-forward hook would have undone is undone here.
/// It must not throw.
using ForwardErrorHook = std::function<void(Module&)>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The one entry point: hooks, then forward(), then hooks.
  std::vector<Tensor> call(std::vector<Tensor> inputs);
  Tensor operator()(const Tensor& x) { return first(call({x})); }
  Tensor operator()(const Tensor& a, const Tensor& b) { return first(call({a, b})); }

  // ---- registration (parameters are created initialized, then registered)
  /// Registers a parameter (a leaf; requires_grad as given) and returns it.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  /// Registers a buffer; non-persistent buffers are left out of state_dict().
  Tensor register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  /// Replaces the tensor registered under `name` (same kind, shape, dtype and device; for a
  /// parameter, a leaf that requires grad as it does), e.g. to tie two layers' weights. The layer's
  /// own member (Linear::weight) is not reached: assign it too, since forward() computes from it.
  void replace_tensor(const std::string& name, const Tensor& t);

  // ---- traversal (dotted names, registration order). A tensor registered under several
  // names (tied weights) is listed once, under its first name, as PyTorch lists it, so an
  // optimizer built from the list updates it once. state_dict() keeps every name.
  NamedTensors named_parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  /// Every module of the tree with its dotted path, this one first ("" or `prefix`). A
  /// module registered under several paths is listed once, under its first, unless
  /// `remove_duplicate` is false (as PyTorch's named_modules).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules(
      const std::string& prefix = "", bool remove_duplicate = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// Child by dotted path ("encoder.down.0"); null if absent.
  std::shared_ptr<Module> find(const std::string& path) const;
  /// Own (non-recursive) parameters and buffers with local names.
  const NamedTensors& local_parameters() const { return params_; }
  const NamedTensors& local_buffers() const { return buffers_; }
  bool buffer_is_persistent(const std::string& local_name) const;

  // ---- modes and conversion
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Moves/casts every parameter and buffer (floating buffers only change dtype) in place;
  /// a tensor whose TensorExtra refuses conversion (a ZeRO-3 partitioned parameter) is an
  /// error, before anything changes. `dtype` must be floating (as PyTorch's Module.to).
  void to(Device device);
  void to(DType dtype);
  /// to(device), then to(dtype); a dtype to() refuses is refused before the move.
  void to(Device device, DType dtype);
  /// Sets every parameter's grad to undefined. (Under a zero::Engine gradients live in
  /// the engine's shards, not in .grad: the engine's step() consumes them.)
  void zero_grad();
  /// requires_grad on every parameter (freezing).
  void requires_grad_(bool on);
  /// Total number of parameter elements.
  int64_t num_parameters() const;

  // ---- activation checkpointing
  /// With `on`, a call() that records a graph (grad mode, and an input or a parameter of
  /// the module that requires grad) keeps none of this module's activations: only its
  /// inputs are saved, and backward recomputes the forward (hooks included) through
  /// autograd::checkpoint. Less memory for the compute of one more forward; see
  /// checkpoint() for what runs twice.
  void set_checkpointing(bool on) { checkpointing_ = on; }
  bool checkpointing() const { return checkpointing_; }

  // ---- hooks (return an id for remove_hook)
  // Hooks run in the order they were registered, except `outer` ones (the ZeRO engine's,
  // which gather the module's parameters before its call and release them after it):
  // whenever they were registered, outer pre-forward hooks run before every other
  // pre-forward hook, and outer forward and error hooks after every other one, so that
  // the others see the module's parameters gathered.
  int add_forward_pre_hook(PreForwardHook h, bool outer = false);
  int add_forward_hook(PostForwardHook h, bool outer = false);
  int add_forward_error_hook(ForwardErrorHook h, bool outer = false);
  void remove_hook(int id);
  /// Hooks registered on this module and not removed (pre-forward, forward and error).
  size_t hook_count() const { return pre_hooks_.size() + post_hooks_.size() + error_hooks_.size(); }

  const std::string& type_name() const { return type_name_; }
  /// One line for the printed tree ("Conv2d(3, 32, kernel=3)").
  virtual std::string extra_repr() const { return ""; }
  /// True for an own state entry a loaded dict may lack, the module keeping its value (as
  /// PyTorch's BatchNorm takes a dict without num_batches_tracked). None by default.
  virtual bool state_entry_optional(const std::string& local_name) const { return false; }
  /// The module tree with shapes and parameter counts.
  std::string pretty_print() const;

 protected:
  /// The computation; called only through call().
  virtual std::vector<Tensor> forward(const std::vector<Tensor>& inputs) = 0;
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  static Tensor first(const std::vector<Tensor>& v) { return v.empty() ? Tensor() : v[0]; }

 private:
  void collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out,
               std::unordered_set<const TensorImpl*>& seen) const;
  void print_into(std::string& out, const std::string& name, int depth) const;
  /// Hooks, forward(), hooks: call() without checkpointing.
  std::vector<Tensor> call_hooked(std::vector<Tensor> inputs);
  /// Whether a parameter of this module or of a descendant requires grad.
  bool trains() const;

  std::string type_name_;
  bool training_ = true;
  bool checkpointing_ = false;
  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::string> non_persistent_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  template <typename Fn>
  struct Hook {
    int id;
    Fn fn;
    bool outer;
  };
  std::vector<Hook<PreForwardHook>> pre_hooks_;
  std::vector<Hook<PostForwardHook>> post_hooks_;
  std::vector<Hook<ForwardErrorHook>> error_hooks_;
  int next_hook_id_ = 0;
};

/// A module with one input and one output; subclasses implement forward(const Tensor&).
class UnaryModule : public Module {
 public:
  using Module::Module;
  using Module::operator();

 protected:
  virtual Tensor forward(const Tensor& x) = 0;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
};

}  // namespace zt::nn
