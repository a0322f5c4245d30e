// The backward engine. Nodes run in decreasing sequence number (reverse creation
// order) once every gradient flowing into them has arrived, a ready AccumulateGrad
// first; gradients for the same input slot are summed. Leaves accumulate through
// AccumulateGrad, which runs the leaf's hooks, adds into .grad() and then runs its
// post-accumulate hooks.
#include "core/autograd.h"

#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/ops.h"

namespace zt::autograd {

static std::atomic<uint64_t> g_next_seq{0};

Node::Node(std::string name, int num_outputs)
    : name_(std::move(name)), num_outputs_(num_outputs), seq_(g_next_seq.fetch_add(1)) {}

void Node::check_saved() const {
  for (const SavedVersion& s : saved) {
    const std::shared_ptr<Storage>& now = s.tensor.impl()->storage;
    if (!now || now != s.storage.lock() || now->version() == s.version) continue;
    const std::string& name = s.tensor.name();
    ZT_FAIL("backward of ", name_, ": a tensor it saved for its gradient, ", s.tensor.str(),
            name.empty() ? "" : " '" + name + "'",
            ", was written in place since the forward (copy_, fill_, add_, mul_ or an "
            "optimizer step; version ",
            s.version, " then, ", now->version(),
            " now), so the gradient would use the new values. Write to a clone(), or after "
            "backward()");
  }
}

std::vector<Tensor> LambdaNode::apply(const std::vector<Tensor>& grad_outputs) {
  ZT_CHECK(fn_ != nullptr,
           "backward through this node a second time: its saved tensors were freed. Pass "
           "retain_graph=true to the first backward if you need to backpropagate twice");
  return fn_(grad_outputs);
}

namespace {

// True when `t` is held by exactly `handles` Tensor handles (those the caller knows of)
// and is the only view of its storage, which it covers contiguously: then nothing else
// can observe it, and it may be updated in place or adopted as a .grad() instead of
// copied. Gradients returned by backward functions usually are such fresh tensors;
// one handed to several edges (an add's backward returns its input gradient twice)
// is not, and is then left alone.
bool sole_owner(const Tensor& t, long handles) {
  if (!t.defined() || !t.has_storage() || t.requires_grad()) return false;
  if (t.impl_ptr().use_count() != handles || t.storage().use_count() != 1) return false;
  return t.offset() == 0 && t.is_contiguous() &&
         t.storage()->bytes() == static_cast<size_t>(t.numel()) * dtype_size(t.dtype());
}

// True when a tensor of shape `from` broadcasts to shape `to`.
bool expands_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

// The gradient `g` that node `n` returned for its input `i`, made to fit the input as
// PyTorch's engine does: summed back over dims the input was broadcast along, converted to
// its dtype; a shape or device it cannot fit is the function's bug, named here.
Tensor fit_gradient(const Node& n, size_t i, Tensor g) {
  if (i >= n.input_meta.size() || !g.defined()) return g;
  const InputMeta& m = n.input_meta[i];
  if (g.sizes() != m.sizes) {
    ZT_CHECK(expands_to(m.sizes, g.sizes()), "backward of ", n.name(),
             " returned a gradient of shape ", shape_str(g.sizes()), " for its input ", i,
             ", whose shape is ", shape_str(m.sizes));
    g = sum_to(g, m.sizes);
  }
  ZT_CHECK(g.device() == m.device, "backward of ", n.name(), " returned a gradient on ",
           g.device().str(), " for its input ", i, ", which is on ", m.device.str());
  return g.dtype() == m.dtype ? g : g.to(m.dtype);
}

// What a gradient hook returned for `g` (undefined: keep g). A hook may change the
// values, not the shape, dtype or device (as PyTorch's rule).
// `where` and `name` say whose hook it is, in the error only.
static Tensor hook_result(const Tensor& g, Tensor r, const char* where, const std::string& name) {
  if (!r.defined()) return g;
  ZT_CHECK(r.sizes() == g.sizes() && r.dtype() == g.dtype() && r.device() == g.device(),
           "a gradient hook on ", where, name, " returned ", r.str(), " for the gradient ", g.str(),
           "; a hook may change a gradient's values, not its shape, dtype or device");
  return r;
}

// Runs call(hook) for each hook of `hooks` (a leaf's, a node's tensor hooks) so that a
// hook may register or remove hooks while it runs (a one-shot hook removing itself), as
// PyTorch's engine: over a snapshot of the list, so a hook registered meanwhile on the
// tensor whose hooks are running runs from the next backward on, not in this one; and
// skipping a hook removed meanwhile. Each function is shared, so the running one stays
// alive whatever the list does.
template <typename Hook, typename Call>
void run_hooks(const std::vector<Hook>& hooks, Call&& call) {
  if (hooks.empty()) return;
  const std::vector<Hook> snapshot = hooks;
  for (const Hook& h : snapshot)
    if (std::any_of(hooks.begin(), hooks.end(), [&](const Hook& now) { return now.fn == h.fn; }))
      call(h);
}

// Accumulates into a leaf's .grad().
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
      : Node("AccumulateGrad", 1), leaf_(std::move(leaf)) {}
  bool accumulates() const override { return true; }
  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    Tensor g = grads[0];
    if (!g.defined()) return {};
    Tensor leaf(leaf_);
    run_hooks(leaf_->leaf_hooks,
              [&](const auto& h) { g = hook_result(g, (*h.fn)(g), "leaf ", leaf.name()); });
    // Frozen since the forward (set_requires_grad(false)): it takes no gradient, as
    // PyTorch's, so an optimizer leaves it alone; nothing was accumulated for the
    // post-accumulate hooks.
    if (!leaf_->requires_grad) return {};
    // Held only here and by `grads` (the engine drops it next), or, for a hook's result,
    // only here (the hook may have kept it): adopt it.
    const int handles = g.same(grads[0]) ? 2 : 1;
    if (leaf_->grad) {
      Tensor cur(leaf_->grad);
      add_(cur, g);
    } else if (sole_owner(g, handles) && g.sizes() == leaf.sizes() && g.dtype() == leaf.dtype()) {
      leaf_->grad = g.impl_ptr();
    } else {
      // Own the gradient: the incoming tensor may be shared with other nodes.
      leaf_->grad = g.detach().clone().impl_ptr();
    }
    run_hooks(leaf_->post_accumulate_hooks, [&](const auto& h) { (*h.fn)(leaf); });
    return {};
  }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

thread_local bool g_grad_enabled = true;

struct BackwardState {
  std::vector<std::function<void()>> callbacks;
  BackwardState* outermost = this;  // a checkpoint's backward runs inside another
  const Node* running = nullptr;    // the node whose gradients are being computed
};
thread_local BackwardState* g_backward = nullptr;

}  // namespace

bool grad_mode_enabled() {
  return g_grad_enabled;
}
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) {
  g_grad_enabled = false;
}
NoGradGuard::~NoGradGuard() {
  g_grad_enabled = prev_;
}
EnableGradGuard::EnableGradGuard() : prev_(g_grad_enabled) {
  g_grad_enabled = true;
}
EnableGradGuard::~EnableGradGuard() {
  g_grad_enabled = prev_;
}

void check_view_history(const Tensor& t, const char* op, const char* role) {
  if (!g_grad_enabled || !t.defined() || t.requires_grad() || t.impl()->view_base.expired()) return;
  const std::shared_ptr<TensorImpl> base = t.impl()->view_base.lock();
  if (!base || !base->requires_grad) return;
  const Tensor b(base);
  ZT_FAIL(op ? op : "", op ? ": " : "", role, ", ", t.str(),
          t.name().empty() ? "" : " '" + t.name() + "'", ", is a view of ", b.str(),
          " made before that tensor required grad, while grad mode is on: the view has "
          "no autograd history, so no gradient would reach the tensor through it. Make the view "
          "after set_requires_grad(), or use a detach()ed view if no gradient should flow");
}

// Every input is looked at, not just up to the first that requires grad: a view without
// history among them is an error (check_view_history).
template <typename Tensors>
static bool any_needs_grad(const Tensors& inputs) {
  if (!g_grad_enabled) return false;
  bool any = false;
  for (const Tensor& t : inputs) any = needs_grad_of(t) || any;
  return any;
}
bool needs_grad(const std::vector<Tensor>& inputs) {
  return any_needs_grad(inputs);
}
bool needs_grad(std::initializer_list<Tensor> inputs) {
  return any_needs_grad(inputs);
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return {impl->grad_fn, impl->output_nr};
  std::shared_ptr<Node> acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl->grad_accumulator = acc;
  }
  return {acc, 0};
}

void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward, const std::vector<Tensor>& saved) {
  if (!needs_grad(inputs)) return;
  auto node =
      std::make_shared<LambdaNode>(name, static_cast<int>(outputs.size()), std::move(backward));
  node->next_edges.reserve(inputs.size());
  node->input_meta.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    node->next_edges.push_back(gradient_edge(t));
    node->input_meta.push_back(
        node->next_edges.back().fn ? InputMeta{t.sizes(), t.dtype(), t.device()} : InputMeta{});
  }
  node->saved.reserve(saved.size());
  for (const Tensor& t : saved) {
    if (!t.defined() || !t.has_storage()) continue;
    node->saved.push_back({t, t.storage(), t.storage()->version()});
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    // An integer or bool output (indices, counts) is not differentiable (as PyTorch's).
    if (!outputs[i].defined() || !is_floating(outputs[i].dtype())) continue;
    TensorImpl* o = outputs[i].impl();
    ZT_DCHECK(o->grad_fn == nullptr);
    o->grad_fn = node;
    o->output_nr = static_cast<int>(i);
    o->requires_grad = true;
  }
}

std::vector<Tensor> apply_function(
    const std::string& name, const std::vector<Tensor>& inputs,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& forward,
    BackwardFn backward, const std::vector<Tensor>& saved) {
  std::vector<Tensor> outputs;
  {
    NoGradGuard ng;
    outputs = forward(inputs);
  }
  // Outputs that alias inputs (identity functions) get a fresh handle so the graph
  // attaches to the output, not to the input; so does a tensor returned a second time,
  // so that each output keeps a gradient slot of its own.
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& o = outputs[k];
    if (!o.defined()) continue;
    for (const Tensor& i : inputs)
      if (o.same(i)) o = o.detach();
    for (size_t j = 0; j < k; ++j)
      if (o.same(outputs[j])) o = o.detach();
    if (o.grad_fn()) o = o.detach();
  }
  size_t n_in = inputs.size();
  record(
      name.c_str(), inputs, outputs,
      [backward = std::move(backward), n_in, name](const std::vector<Tensor>& g) {
        std::vector<Tensor> gi = backward(g);
        ZT_CHECK(gi.size() == n_in, "custom function '", name, "' returned ", gi.size(),
                 " gradients for ", n_in, " inputs");
        return gi;
      },
      saved);
  return outputs;
}

void queue_callback(std::function<void()> fn) {
  ZT_CHECK(g_backward != nullptr, "queue_callback called outside of a backward pass");
  g_backward->outermost->callbacks.push_back(std::move(fn));
}

bool in_backward() {
  return g_backward != nullptr;
}

const std::string* running_backward_node() {
  return g_backward && g_backward->running ? &g_backward->running->name() : nullptr;
}

namespace {

// The roots' gradient edges with their seed gradients: `grads[i]`, or ones for an
// undefined one (scalar roots only), converted to the root's dtype.
std::vector<std::pair<Edge, Tensor>> seed_gradients(const std::vector<Tensor>& roots,
                                                    const std::vector<Tensor>& grads) {
  ZT_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " roots but ", grads.size(),
           " gradients");
  std::vector<std::pair<Edge, Tensor>> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    ZT_CHECK(r.defined() && r.requires_grad(),
             "backward: tensor does not require grad and has no grad_fn (did you compute it "
             "under NoGradGuard, or from tensors that do not require grad? A gradient, "
             ".grad() or one a hook was given, is one: backward records no graph, so zt "
             "computes no higher-order gradients)");
    Tensor g = grads[i];
    if (!g.defined()) {
      ZT_CHECK(r.numel() == 1,
               "backward: grad can be implicitly created only for scalar "
               "outputs; this output has shape ",
               shape_str(r.sizes()), " — pass a gradient of that shape");
      g = ones(r.sizes(), r.dtype(), r.device());
    } else {
      ZT_CHECK(g.sizes() == r.sizes(), "backward: gradient shape ", shape_str(g.sizes()),
               " does not match output shape ", shape_str(r.sizes()));
      ZT_CHECK(g.device() == r.device(), "backward: gradient on ", g.device().str(),
               " for an output on ", r.device().str());
      if (g.dtype() != r.dtype()) g = g.to(r.dtype());  // as PyTorch: in the output's dtype
    }
    seeds.emplace_back(gradient_edge(r), g);
  }
  return seeds;
}

// For every node reachable from the seeds: how many edges lead into it, so that it runs
// once all of its gradients have arrived.
std::unordered_map<Node*, int> count_dependencies(
    const std::vector<std::pair<Edge, Tensor>>& seeds) {
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const auto& [e, g] : seeds) {
    if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.fn) continue;
      ++deps[e.fn.get()];
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }
  return deps;
}

// The gradients gathered so far for the nodes still to run, one slot per node output,
// and a handle on each such node (so it lives until it ran).
struct GradBuffers {
  std::unordered_map<Node*, std::vector<Tensor>> slots;
  std::unordered_map<Node*, std::shared_ptr<Node>> owners;

  // Adds g into the slot of edge e (nothing for a missing edge or gradient).
  void add(const Edge& e, const Tensor& g) {
    if (!e.fn || !g.defined()) return;
    auto& buf = slots[e.fn.get()];
    owners[e.fn.get()] = e.fn;
    if (buf.empty()) buf.resize(e.fn->num_outputs());
    Tensor& slot = buf[e.input_nr];
    if (!slot.defined()) {
      slot = g;
    } else if (slot.sizes() == g.sizes() && slot.dtype() == g.dtype() && sole_owner(slot, 1)) {
      add_(slot, g);  // the buffer holds the only handle: sum in place
    } else {
      slot = ::zt::add(slot, g);
    }
  }
  // Node n's gathered gradients, one per output (undefined where none came); forgets them.
  std::vector<Tensor> take(Node* n) {
    std::vector<Tensor> in = std::move(slots[n]);
    slots.erase(n);
    in.resize(n->num_outputs());
    return in;
  }
};

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph) {
  const std::vector<std::pair<Edge, Tensor>> seeds = seed_gradients(roots, grads);
  std::unordered_map<Node*, int> deps = count_dependencies(seeds);
  GradBuffers buffers;
  // Ready nodes: an AccumulateGrad first, then the latest created (reverse creation order).
  auto cmp = [](Node* a, Node* b) {
    return std::make_pair(a->accumulates(), a->sequence_nr()) <
           std::make_pair(b->accumulates(), b->sequence_nr());
  };
  std::priority_queue<Node*, std::vector<Node*>, decltype(cmp)> ready(cmp);
  for (const auto& [e, g] : seeds) {
    buffers.add(e, g);
    buffers.owners[e.fn.get()] = e.fn;
  }
  for (const auto& [e, g] : seeds)
    if (deps[e.fn.get()] == 0) ready.push(e.fn.get());

  BackwardState state;
  BackwardState* prev = g_backward;
  if (prev) state.outermost = prev->outermost;
  g_backward = &state;
  struct Restore {
    BackwardState* prev;
    ~Restore() { g_backward = prev; }
  } restore{prev};

  NoGradGuard ng;
  std::unordered_set<Node*> done;
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    if (!done.insert(n).second) continue;
    state.running = n;
    std::vector<Tensor> in = buffers.take(n);
    run_hooks(n->pre_hooks, [&](const PreHook& h) {
      Tensor& g = in[h.output_nr];
      if (g.defined()) g = hook_result(g, (*h.fn)(g), "an output of ", n->name());
    });
    for (const auto& [idx, hook] : n->retain_hooks) {
      if (in[idx].defined())
        in[idx] = hook_result(in[idx], hook(in[idx]), "an output of ", n->name());
    }
    // A node no gradient reached (every edge into it carried none: an output the loss
    // does not use, an input a checkpointed function ignores) is not called, as in
    // PyTorch's engine: its functions may assume a gradient. Its edges pass none on.
    std::vector<Tensor> out;
    if (std::any_of(in.begin(), in.end(), [](const Tensor& t) { return t.defined(); })) {
      n->check_saved();
      out = n->apply(in);
    }
    if (!retain_graph) n->release();
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.fn) continue;
      if (i < out.size()) buffers.add(e, fit_gradient(*n, i, out[i]));
      if (--deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
    buffers.owners.erase(n);
  }
  state.running = nullptr;
  // A callback may queue more (a flush that queues the next stage): run them until none
  // is left, as PyTorch's engine, by index, since the list grows (and moves) meanwhile.
  for (size_t i = 0; i < state.callbacks.size(); ++i) {
    std::function<void()> cb = std::move(state.callbacks[i]);
    cb();
  }
}

}  // namespace zt::autograd
