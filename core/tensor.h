// Tensor: a cheap, shared handle to (storage, sizes, strides, offset, dtype) plus
// autograd metadata. Views share storage. A tensor whose storage was released (a
// ZeRO-3 parameter that is NOT_AVAILABLE) keeps its full shape and throws, naming
// itself, when its data is touched.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/storage.h"

namespace zt {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

namespace autograd {
class Node;
}
class Tensor;
using GradHook = std::function<Tensor(const Tensor&)>;  // may return undefined: keep grad
using PostAccumulateHook = std::function<void(const Tensor& param)>;

/// A registered hook: the id its register call returned (for removal) and the function,
/// shared, so that backward runs it from a snapshot of the list it is in, which the
/// hook itself may change (a one-shot hook removing itself).
template <typename Fn>
struct RegisteredHook {
  int id = 0;
  std::shared_ptr<Fn> fn;
};

/// Opaque per-tensor data owned by other layers (the ZeRO engine's parameter state).
struct TensorExtra {
  virtual ~TensorExtra() = default;
  /// Why nn::Module::to may not convert the tensor in place (its dtype or device); empty
  /// where it may.
  virtual std::string conversion_refused() const { return {}; }
  /// Why an optim::Optimizer may not update the tensor (another owner trains it); empty
  /// where it may.
  virtual std::string optimizer_refused() const { return {}; }
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // null: released (see unavailable_hint)
  Shape sizes;
  Shape strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  Device device;
  std::string name;              // dotted parameter name, when it has one
  std::string unavailable_hint;  // what to do when the storage is released

  // autograd
  bool requires_grad = false;
  bool retains_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  int output_nr = 0;
  std::weak_ptr<autograd::Node> grad_accumulator;    // leaves only
  std::vector<RegisteredHook<GradHook>> leaf_hooks;  // run before accumulation (leaves)
  std::vector<RegisteredHook<PostAccumulateHook>> post_accumulate_hooks;
  int next_hook_id = 0;  // for register_hook and register_post_accumulate_grad_hook
  /// A view made under a NoGradGuard of a tensor that requires grad (or a view of such a
  /// view): an in-place write to it with grad mode on is an error, as in PyTorch.
  bool no_grad_view = false;
  /// For a view made of a tensor that required no grad then (of the first such tensor of a
  /// chain of views, as PyTorch's base): that tensor. The view has no history, so should
  /// the tensor require grad later, autograd refuses the view in grad mode, where it would
  /// carry no gradient to it.
  std::weak_ptr<TensorImpl> view_base;
  std::shared_ptr<TensorExtra> extra;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (contiguous, on `device`, tagged by the current MemTag)
  static Tensor empty(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());

  // ---- metadata
  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  const Shape& sizes() const { return meta().sizes; }
  const Shape& strides() const { return meta().strides; }
  /// Size of one dim; negative dims count from the end.
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(meta().sizes.size()); }
  int64_t numel() const { return shape_numel(meta().sizes); }
  int64_t offset() const { return meta().offset; }
  DType dtype() const { return meta().dtype; }
  Device device() const { return meta().device; }
  bool is_cuda() const { return meta().device.is_cuda(); }
  bool is_contiguous() const;
  /// True while the storage is present (false for a released ZeRO parameter).
  bool has_storage() const { return impl_ && impl_->storage != nullptr; }
  const std::shared_ptr<Storage>& storage() const;
  const std::string& name() const { return meta().name; }
  void set_name(std::string n) const { meta().name = std::move(n); }
  /// "f32[2, 3] cpu".
  std::string str() const;

  // ---- data access (throws if released, naming the tensor)
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    ZT_CHECK(dtype_of<T>::value == dtype(), "data<", dtype_name(dtype_of<T>::value),
             ">() on a tensor of dtype ", dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }
  /// The single element of a one-element tensor, converted to double (copies from GPU).
  double item() const;
  /// All elements as doubles, in logical order (copies from GPU); for tests and logging.
  std::vector<double> to_vector() const;

  // ---- views: share storage, differentiable
  Tensor view(const Shape& sizes) const;     // requires compatible strides
  Tensor reshape(const Shape& sizes) const;  // view if possible, else copy; one -1 allowed
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// A view of this tensor's storage with `sizes`, `strides` and element `offset` (into
  /// the storage, as offset()), checked to stay inside it. Like detach(), it has no
  /// autograd history: for buffers and gradients (one buffer handed out as the gradients
  /// of several inputs, and joined again), not for tensors that need a backward.
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t offset) const;
  /// Python-style slice with step > 0; start/end clamped like Python.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& sizes) const;  // -1 keeps a size
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// Self if contiguous, else a contiguous copy (differentiable).
  Tensor contiguous() const;

  // ---- copies
  Tensor to(DType dtype) const;    // differentiable between floating types
  Tensor to(Device device) const;  // differentiable
  Tensor clone() const;            // differentiable, contiguous
  /// Copies src into self (broadcast, cast, across devices). Not recorded by autograd:
  /// in grad mode a `src` that requires grad is an error (its gradient would be lost;
  /// copy src.detach(), or build the tensor out of place with cat, stack or where).
  const Tensor& copy_(const Tensor& src) const;
  /// Fills self with a value. Not recorded by autograd.
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const { return fill_(0.0); }

  // ---- autograd
  bool requires_grad() const { return meta().requires_grad; }
  /// Marks a leaf as requiring grad (error on non-leaves). A backward takes a leaf's
  /// gradient only while it requires grad: one frozen after a forward gets none from it.
  /// Views made before it required grad have no history: grad mode refuses them.
  const Tensor& set_requires_grad(bool r = true) const;
  bool is_leaf() const;
  Tensor grad() const;
  /// Sets .grad() (undefined clears it); `g` must have this tensor's shape, dtype and
  /// device, and no two elements in one memory location (backward adds into it in place).
  void set_grad(const Tensor& g) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const { return meta().grad_fn; }
  /// Backward from this tensor: scalar, or with `grad` of the same shape.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  /// Same storage, no autograd history.
  Tensor detach() const;
  /// This handle takes `src`'s data (storage, shape, strides, dtype, device), as PyTorch's
  /// `t.data = src`: every holder of the handle (a module's member, its registration) sees
  /// the new data; the autograd state, name and hooks stay.
  void set_data(const Tensor& src) const;
  /// Keep .grad() for a non-leaf after backward.
  void retain_grad() const;
  /// Hook on this tensor's gradient (may return a replacement). Returns an id for
  /// remove_hook. A hook that captures its own tensor by value (not a weak_ptr to its
  /// impl) forms a reference cycle (tensor -> grad_fn -> hook -> tensor) that keeps the
  /// tensor, its graph and the leaves' gradients alive until the hook is removed.
  int register_hook(GradHook hook) const;
  /// Removes the tensor hook registered under `id` (no-op if it is already gone). A hook
  /// removed during backward does not run after that; one registered during backward on
  /// a tensor whose hooks are running runs from the next backward on.
  void remove_hook(int id) const;
  /// Leaf only: called after the gradient was accumulated into .grad(). Returns an id
  /// for remove_post_accumulate_grad_hook.
  int register_post_accumulate_grad_hook(PostAccumulateHook hook) const;
  /// Removes the hook registered under `id` (no-op if it is already gone).
  void remove_post_accumulate_grad_hook(int id) const;

  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  Tensor make_view(const Shape& sizes, const Shape& strides, int64_t offset) const;
  /// The metadata; an undefined tensor is an error (not a null dereference).
  TensorImpl& meta() const {
    if (!impl_) [[unlikely]]
      undefined_tensor();
    return *impl_;
  }
  [[noreturn]] static void undefined_tensor();
  std::shared_ptr<TensorImpl> impl_;
};

/// t.data<T>(), or nullptr for an undefined t (an optional weight, bias or gradient).
template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

/// Tensors with their names, in order: parameters and buffers by dotted name, state
/// dicts, safetensors files.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Contiguous strides for sizes.
Shape contiguous_strides(const Shape& sizes);
/// Wraps a negative dim; error if out of range (a 0-d tensor has no dims: an op that
/// treats a scalar as one element, as reductions do, checks against 1 itself).
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op = "dim");

}  // namespace zt
