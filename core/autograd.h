// Autograd: a define-by-run graph of Nodes. Each differentiable op records one Node
// whose backward closure maps output gradients to input gradients; leaves that require
// grad accumulate through an AccumulateGrad node. backward() runs a ready AccumulateGrad
// first (as PyTorch), other nodes in reverse creation order once ready (deterministic).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/tensor.h"

namespace zt::autograd {

/// Where a gradient goes: input slot `input_nr` of `fn`.
struct Edge {
  std::shared_ptr<Node> fn;
  int input_nr = 0;
};

/// What an input's gradient must be: its shape, dtype and device when it was recorded.
struct InputMeta {
  Shape sizes;
  DType dtype = DType::f32;
  Device device;
};

/// A tensor hook on the gradient of a node's output `output_nr`.
struct PreHook {
  int output_nr = 0;
  int id = 0;  // what Tensor::register_hook returned
  std::shared_ptr<GradHook> fn;
};

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

/// A tensor a node's backward reads, with its storage's version when it was saved. An
/// in-place write to it since (copy_, fill_, add_, mul_, an optimizer update) is an error
/// when the node runs, as PyTorch's version counter makes it. A storage swapped meanwhile
/// (a ZeRO-3 parameter released and gathered again) is not a write.
struct SavedVersion {
  Tensor tensor;
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node(std::string name, int num_outputs);
  virtual ~Node() = default;
  /// Gradients for each input edge from gradients for each output (undefined = zero).
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) = 0;
  /// Frees saved state after backward without retain_graph.
  virtual void release() {}
  const std::string& name() const { return name_; }
  int num_outputs() const { return num_outputs_; }
  uint64_t sequence_nr() const { return seq_; }
  /// True for a leaf's AccumulateGrad: it runs as soon as it is ready, before any other
  /// ready node (as PyTorch's), so a gradient is final, and its post-accumulate hooks (a
  /// ZeRO engine's reduce-scatter) run, as early as possible, even when the node was made
  /// by an older graph that something still holds.
  virtual bool accumulates() const { return false; }

  std::vector<Edge> next_edges;  // one per differentiable input
  /// Per edge: the input's metadata (record() fills it), against which the engine checks
  /// the gradient apply() returns: a gradient the input broadcast to is summed back, one
  /// of another dtype converted, anything else is an error naming the node.
  std::vector<InputMeta> input_meta;
  /// Hooks on an output's gradient before apply() (tensor hooks), in registration order.
  std::vector<PreHook> pre_hooks;
  /// retain_grad's hooks: after every pre-hook, as PyTorch's, so .grad() is the gradient
  /// the hooks made, whenever retain_grad() was called.
  std::vector<std::pair<int, GradHook>> retain_hooks;
  /// The tensors apply() reads (record()'s `saved`); checked before it runs.
  std::vector<SavedVersion> saved;
  /// Error naming the node and the tensor if one in `saved` was written in place since.
  void check_saved() const;

 private:
  std::string name_;
  int num_outputs_;
  uint64_t seq_;
};

/// A Node whose backward is a closure; the closure owns what it saved.
class LambdaNode : public Node {
 public:
  LambdaNode(std::string name, int num_outputs, BackwardFn fn)
      : Node(std::move(name), num_outputs), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  void release() override {
    fn_ = nullptr;
    saved.clear();
  }

 private:
  BackwardFn fn_;
};

/// True unless a NoGradGuard is active on this thread.
bool grad_mode_enabled();

/// Disables graph recording on this thread while in scope.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// Enables graph recording while in scope (inside a NoGradGuard).
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();

 private:
  bool prev_;
};

/// True if recording is on and any of `inputs` requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
/// Error, in grad mode, if `t` (requiring no grad) is a view made before the tensor it views
/// required grad: it has no history, so used as an op's input, or written in place, it
/// would carry no gradient to that tensor. needs_grad and the in-place writes call it; the
/// error names `op` (may be null) and the tensor's `role` in it ("the source").
void check_view_history(const Tensor& t, const char* op, const char* role);
/// needs_grad of one input, for the hottest call sites (scalar ops): they test it before
/// they build what record() takes (shape copies, closures, argument lists).
inline bool needs_grad_of(const Tensor& a) {
  if (!a.defined() || !grad_mode_enabled()) return false;
  if (a.requires_grad()) return true;
  if (!a.impl()->view_base.expired()) check_view_history(a, nullptr, "an input");
  return false;
}
bool needs_grad(const std::vector<Tensor>& inputs);

/// The edge a gradient for `t` should flow into (empty if t needs no grad).
Edge gradient_edge(const Tensor& t);

/// Records an op: if any input requires grad (and grad mode is on), attaches a
/// LambdaNode to `outputs` whose closure maps output grads to one grad per input
/// (undefined grads are allowed). Outputs must be fresh tensors (no history). Outputs of
/// an integer or bool dtype (indices, counts, masks) are not differentiable: they get no
/// grad_fn and do not require grad, and their gradient slot is always undefined.
/// Saved tensors captured by the closure should be inputs or detach()ed outputs; list
/// those whose values it reads in `saved`, so that an in-place write to one before the
/// backward is an error instead of a wrong gradient (shapes alone need not be listed).
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward, const std::vector<Tensor>& saved = {});

/// A custom autograd function usable outside core: `forward` runs without recording
/// and returns the outputs; `backward` maps output grads to one grad per input; `saved`
/// and integer outputs as record()'s.
std::vector<Tensor> apply_function(
    const std::string& name, const std::vector<Tensor>& inputs,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& forward,
    BackwardFn backward, const std::vector<Tensor>& saved = {});

/// Runs backward from `roots` with `grads` (undefined = ones for scalars).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph = false);

/// Queues a callback to run once when the current backward pass finishes: the outermost
/// one, when a checkpoint's recomputation runs a backward inside it (error if no
/// backward is running on this thread).
void queue_callback(std::function<void()> fn);
/// True while this thread runs a backward pass.
bool in_backward();
/// The name of the node ("linear", a custom function's name) whose gradients this
/// thread's innermost backward pass is computing; null outside one. Errors raised there
/// name it (core/error_context.h).
const std::string* running_backward_node();

}  // namespace zt::autograd
