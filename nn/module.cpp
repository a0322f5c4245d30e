// Module registration, traversal, hooks and printing.
#include "nn/module.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <iterator>
#include <sstream>

#include "core/error_context.h"

namespace zt::nn {

static std::atomic<uint64_t> registrations{0};

uint64_t registration_count() {
  return registrations.load(std::memory_order_relaxed);
}

static std::vector<RegistrationObserver*>& observers() {
  thread_local std::vector<RegistrationObserver*> v;
  return v;
}
void push_registration_observer(RegistrationObserver* o) {
  observers().push_back(o);
}
// A scope closed before one opened inside it (held by an object that ends early) leaves
// the stack alone: the scopes still open go on deciding, the innermost of them first.
void pop_registration_observer(RegistrationObserver* o) {
  auto& v = observers();
  const auto it = std::find(v.rbegin(), v.rend(), o);
  ZT_CHECK(it != v.rend(),
           "a registration scope is closed on a thread other than the one that opened it");
  v.erase(std::next(it).base());
}
RegistrationObserver* current_registration_observer() {
  return observers().empty() ? nullptr : observers().back();
}

std::vector<Tensor> Module::call(std::vector<Tensor> inputs) {
  // A checkpoint only where a graph would be recorded: frozen modules run plainly.
  if (!checkpointing_ || !autograd::grad_mode_enabled() ||
      (!autograd::needs_grad(inputs) && !trains()))
    return call_hooked(std::move(inputs));
  // The recomputation holds the module while it runs; one destroyed before its backward
  // (when shared_ptr-owned, as models are) is an error, not a call into freed memory.
  std::weak_ptr<Module> owner = weak_from_this();
  const bool owned = !owner.expired();
  return autograd::checkpoint(
      type_name_, inputs,
      [this, owner = std::move(owner), owned, name = type_name_](const std::vector<Tensor>& x) {
        const std::shared_ptr<Module> alive = owner.lock();
        ZT_CHECK(alive || !owned, "backward through checkpointed ", name,
                 ": the module was destroyed after its forward");
        return call_hooked(x);
      });
}

bool Module::trains() const {
  for (const auto& [name, p] : params_)
    if (p.requires_grad()) return true;
  for (const auto& [name, child] : children_)
    if (child->trains()) return true;
  return false;
}

namespace {

// The modules this thread is running, as a list of frames from the innermost outwards
// (each frame lives on the stack of the call it marks): errors raised inside them say
// which one (core/error_context.h).
struct Running;
thread_local const Running* innermost = nullptr;

struct Running {
  explicit Running(const Module* m) : module(m), outer(innermost) { innermost = this; }
  ~Running() { innermost = outer; }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;

  const Module* module;
  const Running* outer;
};

// `child`'s dotted path below `parent`, or "" when it is not registered under it. (Not
// named_modules(): that needs the parent owned by a shared_ptr, and this must not throw.)
std::string path_below(const Module& parent, const Module* child) {
  for (const auto& [name, m] : parent.named_children()) {
    if (m.get() == child) return name;
    const std::string below = path_below(*m, child);
    if (!below.empty()) return name + "." + below;
  }
  return "";
}

// "in module decoder.up.1.conv (Conv2d) of Decoder": the innermost running module, by its
// path from the outermost one (a module called without being registered under the one
// that called it is a "<Type>" step of the path).
std::string describe_running() {
  std::vector<const Module*> v;  // outermost first
  for (const Running* r = innermost; r != nullptr; r = r->outer) v.insert(v.begin(), r->module);
  if (v.empty()) return "";
  const Module& inner = *v.back();
  if (v.size() == 1) return "in module " + inner.type_name();
  std::string path;
  for (size_t i = 1; i < v.size(); ++i) {
    const std::string step = path_below(*v[i - 1], v[i]);
    path += (path.empty() ? "" : ".") + (step.empty() ? "<" + v[i]->type_name() + ">" : step);
  }
  return "in module " + path + " (" + inner.type_name() + ") of " + v.front()->type_name();
}

[[maybe_unused]] const bool provider_installed =
    (set_error_context_provider(&describe_running), true);

}  // namespace

// Runs a snapshot of `hooks`, as PyTorch does: a hook may remove itself (a one-shot hook)
// or add hooks to the same list, which run from its next pass.
template <typename Hooks, typename... Args>
static void run_hooks(const Hooks& hooks, Args&... args) {
  if (hooks.empty()) return;
  const Hooks snapshot = hooks;
  for (auto& h : snapshot) h.fn(args...);
}

// Adds a hook to `hooks` where it runs: an outer one after the outer ones and before the
// others when `outer_first` (pre-forward hooks), else after the others (forward and error
// hooks, which undo what the pre-forward ones did in the reverse order); any other one
// after the others and before the outer ones that come last.
template <typename Hooks, typename Fn>
static void insert_hook(Hooks& hooks, int id, Fn fn, bool outer, bool outer_first) {
  auto pos = hooks.end();
  if (outer == outer_first)
    pos = std::find_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.outer != outer; });
  hooks.insert(pos, {id, std::move(fn), outer});
}

std::vector<Tensor> Module::call_hooked(std::vector<Tensor> inputs) {
  const Running running_now(this);
  try {
    run_hooks(pre_hooks_, *this, inputs);
    std::vector<Tensor> outputs = forward(inputs);
    run_hooks(post_hooks_, *this, inputs, outputs);
    return outputs;
  } catch (...) {
    run_hooks(error_hooks_, *this);
    throw;
  }
}

std::vector<Tensor> UnaryModule::forward(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 1, type_name(), " takes one input, got ", inputs.size());
  return {forward(inputs[0])};
}

static void check_name(const std::string& name, const std::string& type) {
  ZT_CHECK(!name.empty() && name.find('.') == std::string::npos, type, ": invalid name '", name,
           "' (must be non-empty and contain no '.')");
}

template <typename V>
static bool has_name(const V& v, const std::string& n) {
  return std::any_of(v.begin(), v.end(), [&](const auto& p) { return p.first == n; });
}

// A name for a new parameter, buffer or child of a `type` module: valid (check_name) and
// not yet taken by any of the three.
template <typename Children>
static void check_new_name(const std::string& name, const std::string& type,
                           const NamedTensors& params, const NamedTensors& buffers,
                           const Children& children) {
  check_name(name, type);
  ZT_CHECK(!has_name(params, name) && !has_name(buffers, name) && !has_name(children, name), type,
           ": '", name, "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name, type_name_, params_, buffers_, children_);
  ZT_CHECK(t.defined(), type_name_, ": parameter '", name, "' is undefined");
  if (!t.is_leaf()) t = t.detach();
  t.set_requires_grad(requires_grad);
  params_.emplace_back(name, t);
  ++registrations;
  if (auto* o = current_registration_observer()) o->on_parameter(*this, name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name(name, type_name_, params_, buffers_, children_);
  buffers_.emplace_back(name, t);
  ++registrations;
  if (!persistent) non_persistent_.push_back(name);
  if (t.defined())
    if (auto* o = current_registration_observer()) o->on_buffer(*this, name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name, type_name_, params_, buffers_, children_);
  ZT_CHECK(m != nullptr, type_name_, ": child '", name, "' is null");
  // A module inside its own subtree would make every traversal endless.
  std::unordered_set<const Module*> seen;
  std::function<bool(const Module&)> reaches_this = [&](const Module& c) {
    if (&c == this) return true;
    if (!seen.insert(&c).second) return false;
    for (const auto& [n, g] : c.children_)
      if (reaches_this(*g)) return true;
    return false;
  };
  ZT_CHECK(!reaches_this(*m), type_name_, ": child '", name, "' (", m->type_name_,
           ") contains this module: adding it would make a cycle");
  children_.emplace_back(name, std::move(m));
  ++registrations;
}

void Module::replace_tensor(const std::string& name, const Tensor& t) {
  for (auto* v : {&params_, &buffers_})
    for (auto& [n, x] : *v)
      if (n == name) {
        // A placeholder (a buffer registered undefined) takes any tensor.
        ZT_CHECK(
            t.defined() && (!x.defined() || (t.sizes() == x.sizes() && t.dtype() == x.dtype() &&
                                             t.device() == x.device())),
            type_name_, ": replace_tensor('", name, "'): the replacement is ",
            t.defined() ? t.str() : std::string("undefined"), ", the registered tensor ",
            x.defined() ? x.str() : std::string("undefined"),
            "; a tie or a load keeps shape, dtype and device");
        // A computed tensor would pass its gradient on to what it was computed from and get
        // none itself; one that does not require grad would freeze the parameter.
        ZT_CHECK(v == &buffers_ || (t.is_leaf() && t.requires_grad() == x.requires_grad()),
                 type_name_, ": replace_tensor('", name,
                 "'): a parameter's replacement must be a leaf tensor that requires grad as the "
                 "parameter does (",
                 x.requires_grad() ? "true" : "false", "); this one ",
                 t.is_leaf() ? "does not" : "is computed by an op",
                 " (tie another parameter, or pass t.detach().set_requires_grad(",
                 x.requires_grad() ? "true" : "false", "))");
        x = t;
        ++registrations;
        return;
      }
  ZT_FAIL(type_name_, ": no parameter or buffer named '", name, "'");
}

bool Module::buffer_is_persistent(const std::string& local_name) const {
  return std::find(non_persistent_.begin(), non_persistent_.end(), local_name) ==
         non_persistent_.end();
}

void Module::collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out,
                     std::unordered_set<const TensorImpl*>& seen) const {
  for (const auto& [n, t] : params ? params_ : buffers_)
    if (t.defined() && seen.insert(t.impl()).second) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", params, true, out, seen);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  collect("", true, recurse, out, seen);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  collect("", false, recurse, out, seen);
  return out;
}

// The module's own shared_ptr, for the traversals that return it.
static std::shared_ptr<Module> owned(const Module& m, const char* what) {
  ZT_CHECK(!m.weak_from_this().expired(), m.type_name(), ": ", what,
           " needs the module owned by a std::shared_ptr (build it with std::make_shared)");
  return std::const_pointer_cast<Module>(m.shared_from_this());
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules(
    const std::string& prefix, bool remove_duplicate) const {
  owned(*this, "named_modules()");
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::unordered_set<const Module*> seen;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m,
                                                                     const std::string& path) {
    if (remove_duplicate && !seen.insert(&m).second) return;
    out.emplace_back(path, std::const_pointer_cast<Module>(m.shared_from_this()));
    for (const auto& [n, c] : m.children_) visit(*c, path.empty() ? n : path + "." + n);
  };
  visit(*this, prefix);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::shared_ptr<Module> Module::find(const std::string& path) const {
  if (path.empty()) return owned(*this, "find(\"\")");
  size_t dot = path.find('.');
  std::string head = path.substr(0, dot);
  if (dot != std::string::npos && dot + 1 == path.size()) return nullptr;  // "a." names nothing
  for (const auto& [n, c] : children_)
    if (n == head) return dot == std::string::npos ? c : c->find(path.substr(dot + 1));
  return nullptr;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

// Converts each parameter and buffer that `differs` with `convert`, keeping its handle
// (the storage is swapped into the existing tensor) and converting its gradient too, as
// PyTorch does. A tensor another layer manages that may not be converted (a ZeRO-3
// partitioned parameter) is refused before anything changes.
static void convert_in_place(const Module& m, const std::string& op,
                             const std::function<bool(const Tensor&)>& differs,
                             const std::function<Tensor(const Tensor&)>& convert) {
  autograd::NoGradGuard ng;
  NamedTensors all = m.named_parameters();
  for (auto& b : m.named_buffers()) all.push_back(std::move(b));
  std::erase_if(all, [&](const auto& nt) { return !nt.second.defined() || !differs(nt.second); });
  for (const auto& [name, t] : all) {
    const std::string why = t.impl()->extra ? t.impl()->extra->conversion_refused() : "";
    ZT_CHECK(why.empty(), op, ": cannot convert '", name, "': ", why);
  }
  for (auto& [name, t] : all) {
    t.set_data(convert(t));
    if (t.grad().defined()) t.set_grad(convert(t.grad()));
  }
}

void Module::to(Device device) {
  convert_in_place(
      *this, type_name_ + ".to(" + device.str() + ")",
      [&](const Tensor& t) { return t.device() != device; },
      [&](const Tensor& t) { return t.to(device); });
}

// A module converts only to a floating dtype: an integer one would round every weight to
// a whole number (and leave integer parameters that require grad).
static void check_module_dtype(const Module& m, DType dtype) {
  ZT_CHECK(is_floating(dtype), m.type_name(), ".to(", dtype_name(dtype),
           "): a module converts only to a floating dtype (f32, f64, bf16, f16); its integer "
           "buffers keep their dtype");
}

void Module::to(DType dtype) {
  check_module_dtype(*this, dtype);
  convert_in_place(
      *this, type_name_ + ".to(" + dtype_name(dtype) + ")",
      [&](const Tensor& t) { return is_floating(t.dtype()) && t.dtype() != dtype; },
      [&](const Tensor& t) { return t.to(dtype); });
}

void Module::to(Device device, DType dtype) {
  check_module_dtype(*this, dtype);
  to(device);
  to(dtype);
}

void Module::zero_grad() {
  for (auto& [n, t] : named_parameters()) t.set_grad(Tensor());
}

void Module::requires_grad_(bool on) {
  for (auto& [n, t] : named_parameters()) t.set_requires_grad(on);  // floating ones only
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

int Module::add_forward_pre_hook(PreForwardHook h, bool outer) {
  insert_hook(pre_hooks_, next_hook_id_, std::move(h), outer, /*outer_first=*/true);
  return next_hook_id_++;
}

int Module::add_forward_hook(PostForwardHook h, bool outer) {
  insert_hook(post_hooks_, next_hook_id_, std::move(h), outer, /*outer_first=*/false);
  return next_hook_id_++;
}

int Module::add_forward_error_hook(ForwardErrorHook h, bool outer) {
  insert_hook(error_hooks_, next_hook_id_, std::move(h), outer, /*outer_first=*/false);
  return next_hook_id_++;
}

void Module::remove_hook(int id) {
  std::erase_if(pre_hooks_, [id](const auto& h) { return h.id == id; });
  std::erase_if(post_hooks_, [id](const auto& h) { return h.id == id; });
  std::erase_if(error_hooks_, [id](const auto& h) { return h.id == id; });
}

void Module::print_into(std::string& out, const std::string& name, int depth) const {
  std::ostringstream os;
  os << std::string(2 * depth, ' ') << (name.empty() ? "" : "(" + name + "): ") << type_name_;
  std::string extra = extra_repr();
  if (!extra.empty()) os << "(" << extra << ")";
  int64_t total = num_parameters();
  if (total > 0) os << "  [" << total << " params]";
  os << "\n";
  for (auto& [n, t] : params_)
    os << std::string(2 * depth + 2, ' ') << n << ": " << shape_str(t.sizes()) << "\n";
  for (auto& [n, t] : buffers_)
    if (t.defined())
      os << std::string(2 * depth + 2, ' ') << n << " (buffer): " << shape_str(t.sizes()) << "\n";
  out += os.str();
  for (auto& [n, c] : children_) c->print_into(out, n, depth + 1);
}

std::string Module::pretty_print() const {
  std::string out;
  print_into(out, "", 0);
  return out;
}

}  // namespace zt::nn
