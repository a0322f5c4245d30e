// Activation checkpointing (autograd::checkpoint). The first run keeps no graph; one
// node stands for the whole function, saving its inputs and the generator's position.
// When the node's output gradients arrive it runs the function again with a graph, from
// the same generator position, and backpropagates through that graph: parameters
// accumulate their gradients there, and the inputs' gradients are what the node returns.
// A parameter's post-accumulate hooks fire once per backward it accumulates in: once per
// checkpointed call that uses it, where a plain graph sums its gradients and fires once
// (the ZeRO reducer sums what it is given twice).
#include "core/checkpoint.h"

#include <utility>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/rng.h"

namespace zt::autograd {

namespace {

thread_local bool g_checkpoint_forward = false;
thread_local bool g_recompute = false;

// Gives `target` a value while in scope and puts the old one back after, also when the
// scope is left by an exception (the thread-local flags, the generator's position).
template <typename T>
class Scoped {
 public:
  Scoped(T& target, const T& value) : target_(target), saved_(target) { target_ = value; }
  ~Scoped() { target_ = saved_; }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;

 private:
  T& target_;
  T saved_;
};

}  // namespace

bool in_checkpoint_forward() {
  return g_checkpoint_forward;
}

bool in_recompute() {
  return g_recompute;
}

std::vector<Tensor> checkpoint(
    const std::string& name, const std::vector<Tensor>& inputs,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn) {
  if (!grad_mode_enabled()) return fn(inputs);
  const Generator start = default_generator();
  // The node keeps the inputs without their history, and whether each wants a gradient.
  std::vector<Tensor> saved(inputs.size());
  std::vector<bool> wants(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    saved[i] = inputs[i].detach();
    wants[i] = inputs[i].requires_grad();
  }
  // The node is recorded even when no input requires grad: the parameters inside still
  // need the backward. A throwaway leaf that requires grad is its last input.
  std::vector<Tensor> node_inputs = inputs;
  node_inputs.push_back(zeros({}).set_requires_grad());
  const size_t n_in = inputs.size();
  auto run_first = [&fn, &name, n_in](const std::vector<Tensor>& x) {
    Scoped<bool> first(g_checkpoint_forward, true);
    std::vector<uint64_t> versions(n_in, 0);
    for (size_t i = 0; i < n_in; ++i)
      if (x[i].defined()) versions[i] = x[i].storage()->version();
    std::vector<Tensor> out =
        fn(std::vector<Tensor>(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n_in)));
    // The recomputation starts from the inputs as they are then: one fn wrote in place
    // would be written twice, and backward would differentiate the wrong forward.
    for (size_t i = 0; i < n_in; ++i)
      ZT_CHECK(!x[i].defined() || x[i].storage()->version() == versions[i], "checkpoint '", name,
               "': the function wrote to its input ", i, " ", shape_str(x[i].sizes()),
               " in place; its recomputation in backward would start from the written value. "
               "Write to a copy (clone()) or use the out-of-place op");
    return out;
  };
  auto recompute = [fn, saved = std::move(saved), wants = std::move(wants),
                    start](const std::vector<Tensor>& grads) {
    std::vector<Tensor> x(saved.size());
    for (size_t i = 0; i < saved.size(); ++i)
      if (saved[i].defined()) {
        x[i] = saved[i].detach();  // a fresh leaf for each recomputation
        x[i].set_requires_grad(wants[i]);
      }
    std::vector<Tensor> out;
    {
      Scoped<Generator> rewind(default_generator(), start);
      EnableGradGuard grad;
      Scoped<bool> again(g_recompute, true);
      Scoped<bool> not_first(g_checkpoint_forward, false);
      out = fn(x);
    }
    std::vector<Tensor> roots, root_grads;
    for (size_t i = 0; i < out.size() && i < grads.size(); ++i)
      if (grads[i].defined() && out[i].defined() && out[i].requires_grad()) {
        roots.push_back(out[i]);
        root_grads.push_back(grads[i]);
      }
    if (!roots.empty()) backward(roots, root_grads);
    std::vector<Tensor> gi(x.size() + 1);  // the throwaway leaf gets none
    for (size_t i = 0; i < x.size(); ++i)
      if (wants[i]) gi[i] = x[i].grad();
    return gi;
  };
  // The recomputation reads the inputs: a write to one before then is an error.
  return apply_function(name, node_inputs, run_first, recompute, inputs);
}

}  // namespace zt::autograd
