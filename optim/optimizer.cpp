// Optimizer base: step bookkeeping, lazily created state, state dict save/load.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "core/ops/dispatch.h"

namespace zt::optim {
namespace {

// A tensor another owner trains (a ZeRO-3 partitioned parameter) is refused by name: an
// optimizer over it would update nothing, without a word.
void check_ours(const std::string& name, const Tensor& p) {
  if (const auto& extra = p.impl()->extra)
    if (const std::string why = extra->optimizer_refused(); !why.empty())
      ZT_FAIL("optimizer: parameter '", name, "' cannot be updated here: ", why);
}

}  // namespace

Optimizer::Optimizer(NamedTensors params, double lr, double weight_decay,
                     std::vector<std::string> slots)
    : params_(std::move(params)),
      state_(params_.size(), ParamState{{}, 0, ParamSettings{1.0, weight_decay}, {}}),
      copies_(params_.size()),
      slot_names_(std::move(slots)),
      lr_(lr) {
  set_lr(lr);
  std::set<std::string> names;
  std::map<const void*, std::string> tensors;  // data address -> first name: tied weights
  for (const auto& [n, p] : params_) {
    index_.emplace(n, index_.size());
    ZT_CHECK(p.defined(), "optimizer: parameter '", n, "' is undefined");
    ZT_CHECK(is_floating(p.dtype()), "optimizer: parameter '", n, "' has dtype ",
             dtype_name(p.dtype()), "; optimizers update floating tensors (fp32 master copies)");
    ZT_CHECK(names.insert(n).second, "optimizer: duplicate parameter name '", n, "'");
    ZT_CHECK(n != "step", "optimizer: 'step' is reserved and cannot name a parameter");
    check_ours(n, p);
    if (p.numel() == 0) continue;
    const auto [first, fresh] = tensors.emplace(p.data_ptr(), n);
    ZT_CHECK(fresh, "optimizer: parameters '", first->second, "' and '", n,
             "' are the same tensor (tied weights?), which would be updated twice a step; give "
             "it once");
  }
}

double Optimizer::checked_lr(const std::string& who, double lr) {
  ZT_CHECK(std::isfinite(lr) && lr >= 0, who, ": learning rate must be finite and >= 0, got ", lr);
  return lr;
}

std::string Optimizer::who() const {
  const std::string k = kind();
  return k.empty() ? "optimizer" : k;
}

void Optimizer::set_lr(double lr) {
  lr_ = checked_lr(who(), lr);
}

void Optimizer::set_low_precision_copy(const std::string& name, Tensor copy) {
  const size_t i = index_of(name, "to give a low-precision copy");
  const Tensor& p = params_[i].second;
  ZT_CHECK(!copy.defined() || (is_floating(copy.dtype()) && copy.is_contiguous() &&
                               copy.numel() == p.numel() && copy.device() == p.device()),
           "optimizer: the low-precision copy of '", name, "' is ", copy.str(),
           " but the parameter is ", p.str(),
           "; pass a contiguous floating tensor of the same numel and device");
  copies_[i] = std::move(copy);
}

// The end of an unknown name's error: a frozen parameter (one a ZeRO engine found frozen
// when it was built) is as unknown to the optimizer as a misspelt one.
constexpr const char* kHeldOnly =
    " (an optimizer holds only the parameters it was made over, so none that was frozen "
    "then)";

size_t Optimizer::index_of(const std::string& name, const char* what) const {
  auto it = index_.find(name);
  ZT_CHECK(it != index_.end(), "optimizer: no parameter named '", name, "' ", what, kHeldOnly);
  return it->second;
}

void Optimizer::check_not_captured(const char* op, const char* held, const char* instead) const {
  ZT_CHECK(replay_states_.empty(), op,
           ": a step of this optimizer was captured in a CUDA graph, which holds ", held, "; ",
           instead, " (or make a new optimizer and graph)");
}

void Optimizer::set_settings(const std::vector<std::string>& names, const ParamSettings& s) {
  check_not_captured("optimizer", "its learning rates and weight decays",
                     "set them before the warm-up steps");
  ZT_CHECK(std::isfinite(s.lr_scale) && s.lr_scale >= 0 && std::isfinite(s.weight_decay) &&
               s.weight_decay >= 0,
           who(), ": settings for ", list_names(names),
           ": lr_scale and weight_decay must be finite and >= 0, got ", s.lr_scale, " and ",
           s.weight_decay);
  check_known(names, "to give settings");
  for (const std::string& n : names) state_[index_.at(n)].settings = s;
}

void Optimizer::check_known(const std::vector<std::string>& names, const char* what) const {
  std::vector<std::string> unknown;
  for (const std::string& n : names)
    if (!index_.count(n)) unknown.push_back(n);
  ZT_CHECK(unknown.empty(), "optimizer: no parameter named ", list_names(unknown), " ", what,
           kHeldOnly);
}

void Optimizer::exclude_from_weight_decay(const std::vector<std::string>& names) {
  check_not_captured("optimizer", "its learning rates and weight decays",
                     "set them before the warm-up steps");
  check_known(names, "to exclude from weight decay");
  for (const std::string& n : names) state_[index_.at(n)].settings.weight_decay = 0.0;
}

const ParamSettings& Optimizer::settings(const std::string& name) const {
  return state_[index_of(name, "(settings)")].settings;
}

void Optimizer::step() {
  ZT_CHECK(broken_.empty(), who(), ": ", broken_,
           ", so the parameters and the optimizer state no longer agree: load a checkpoint (or "
           "build a new optimizer) to go on");
  autograd::NoGradGuard ng;
  std::vector<Tensor> ps, gs, copies;
  std::vector<ParamState*> states;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    check_ours(name, p);  // (partitioned after this optimizer was made)
    Tensor g = p.grad();
    if (!g.defined()) continue;
    ZT_CHECK(g.sizes() == p.sizes() && g.device() == p.device(), "optimizer: gradient of '", name,
             "' is ", g.str(), " but the parameter is ", p.str());
    if (g.dtype() != p.dtype()) g = g.to(p.dtype());
    ps.push_back(p);
    gs.push_back(std::move(g));
    states.push_back(&state_[i]);
    copies.push_back(copies_[i]);
  }
  const bool capturing = graph_capturing();  // updates recorded, none run
  if (capturing) {
    ZT_CHECK(capturable_,
             "optimizer: a step is being captured in a CUDA graph, but the "
             "optimizer is not capturable: call set_capturable(true) before the warm-up steps");
    replay_makers_.clear();
    replay_states_ = states;
    replay_writes_ = ps;
    replay_writes_.insert(replay_writes_.end(), copies.begin(), copies.end());
    capture_counted_ = true;
  }
  ++step_count_;
  for (ParamState* st : states) ++st->step;
  // A step that fails before it updates anything (out of memory for the first step's
  // moments) is as if not taken: counters back, the slots it made gone, so the step can
  // be taken again. One that fails after some parameters were updated (a later group's
  // launch refused on a GPU) cannot be taken back: the next step() says so.
  for (ParamState* st : states) st->made.clear();
  updated_some_ = false;
  try {
    update_many(ps, gs, states, copies);
  } catch (const std::exception& e) {
    if (updated_some_ && !capturing) {
      broken_ = std::string("an earlier step failed after it had updated some parameters (") +
                e.what() + ")";
      throw;
    }
    undo_step(states, capturing);
    throw;
  }
}

void Optimizer::undo_step(const std::vector<ParamState*>& states, bool capturing) {
  if (capturing) {  // no step was captured
    replay_makers_.clear();
    replay_states_.clear();
    replay_writes_.clear();
    capture_counted_ = false;
  }
  --step_count_;
  // Every slot this step made, whatever the parameter's step count: SGD's momentum buffer
  // may be made for a parameter that took steps without one.
  for (ParamState* st : states) {
    --st->step;
    for (const std::string& s : st->made) st->slots.erase(s);
    st->made.clear();
  }
}

namespace {

// A step count as a state dict holds it: a whole number >= 0 (a negative one would divide
// by zero in Adam's bias correction).
bool is_step_count(double v) {
  return v >= 0 && v == std::floor(v) && v < 9.2e18;
}

// k[j] = values[j]: fills on k's device (no host copy, so a replay reads them in order).
void fill_constants(const Tensor& k, const std::vector<double>& values) {
  for (size_t j = 0; j < values.size(); ++j)
    k.narrow(0, static_cast<int64_t>(j), 1).fill_(values[j]);
}
}  // namespace

void Optimizer::before_replay() {
  ZT_CHECK(capture_counted_ || !replay_states_.empty(),
           "optimizer: before_replay() without a captured step");
  if (!capture_counted_) {
    ++step_count_;
    for (ParamState* st : replay_states_) ++st->step;
    // The replay writes the parameters (and their low-precision copies) as an eager step
    // does: a graph recorded before it sees them written.
    ::zt::detail::count_writes(replay_writes_);
  }
  capture_counted_ = false;
  for (size_t i = 0; i < replay_makers_.size(); ++i) {
    if (!replay_makers_[i]) continue;
    fill_constants(constants_[i], replay_makers_[i]());
  }
}

Tensor Optimizer::step_constants(size_t group, Device device,
                                 std::function<std::vector<double>()> make) {
  if (!capturable_) return Tensor();
  const std::vector<double> values = make();
  const auto n = static_cast<int64_t>(values.size());
  if (constants_.size() <= group) constants_.resize(group + 1);
  Tensor& k = constants_[group];
  if (!k.defined() || k.numel() != n || k.device() != device) {
    ZT_CHECK(!graph_capturing(),
             "optimizer: the captured step has a parameter group that no "
             "warm-up step had; run the step eagerly (capturable) before capturing it");
    MemTagScope tag(MemTag::kOptimState);
    k = Tensor::empty({n}, DType::f64, device);
  }
  if (graph_capturing()) {
    if (replay_makers_.size() <= group) replay_makers_.resize(group + 1);
    replay_makers_[group] = std::move(make);
  } else {
    fill_constants(k, values);
  }
  return k;
}

void Optimizer::update_many(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                            const std::vector<ParamState*>& states,
                            const std::vector<Tensor>& copies) {
  for (size_t i = 0; i < params.size(); ++i) {
    updating();
    update(params[i], grads[i], *states[i]);
    write_copy(copies[i], params[i]);
  }
}

void Optimizer::update_fused(
    const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
    const std::vector<ParamState*>& states, const std::vector<Tensor>& copies,
    const std::function<FusedEntry(size_t i)>& entry,
    const std::function<void(size_t i, const FusedEntry& e)>& fallback,
    const std::function<std::function<std::vector<double>()>(const FusedGroup&)>& constants,
    const std::function<void(const FusedGroup&, const Tensor& on_device)>& run) {
  // (device type, device index, dtype, copy dtype or -1, step key, lr scale, weight decay)
  // -> parameters.
  std::map<std::tuple<int, int, int, int, int64_t, double, double>, FusedGroup> groups;
  std::vector<size_t> late_copies;  // copies the kernels cannot write: after the update
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    FusedEntry e = entry(i);
    std::vector<Tensor> others{grads[i]};
    for (const Tensor& s : e.slots)
      if (s.defined()) others.push_back(s);
    if (!fused_path(p, others)) {
      check_capturable_path(p);
      updating();
      fallback(i, e);
      write_copy(copies[i], p);
      continue;
    }
    const bool in_pass = fused_copy(copies[i], p);
    if (copies[i].defined() && !in_pass) late_copies.push_back(i);
    const int copy_dtype = in_pass ? static_cast<int>(copies[i].dtype()) : -1;
    const ParamSettings& s = states[i]->settings;
    FusedGroup& gr =
        groups[{static_cast<int>(p.device().type), p.device().index, static_cast<int>(p.dtype()),
                copy_dtype, e.step_key, s.lr_scale, s.weight_decay}];
    if (!gr.state) {
      gr.state = states[i];
      gr.step_key = e.step_key;
      gr.slots.resize(e.slots.size());
    }
    gr.p.push_back(p);
    gr.g.push_back(grads[i]);
    for (size_t k = 0; k < e.slots.size(); ++k)
      if (e.slots[k].defined()) gr.slots[k].push_back(std::move(e.slots[k]));
    if (in_pass) gr.copy.push_back(copies[i]);
  }
  size_t index = 0;
  for (const auto& [key, gr] : groups) {
    const Tensor on_device = step_constants(index++, gr.p[0].device(), constants(gr));
    updating();
    run(gr, on_device);
  }
  for (size_t i : late_copies) write_copy(copies[i], params[i]);
}

void Optimizer::write_copy(const Tensor& copy, const Tensor& param) {
  if (copy.defined()) copy.copy_(param.reshape(copy.sizes()));
}

void Optimizer::zero_grad() {
  for (const auto& [n, p] : params_) p.set_grad(Tensor());
}

Tensor& Optimizer::slot(ParamState& state, const std::string& name, const Tensor& param,
                        bool* created) {
  auto it = state.slots.find(name);
  if (created) *created = it == state.slots.end();
  if (it != state.slots.end()) return it->second;
  // Made inside a capture, its zero fill would be part of the graph: every replay would
  // start the parameter's state over.
  ZT_CHECK(!graph_capturing(), "optimizer: the captured step creates the '", name,
           "' state of a parameter; run a warm-up step in which every parameter gets a gradient "
           "before capturing");
  MemTagScope tag(MemTag::kOptimState);
  Tensor made = zeros(param.sizes(), param.dtype(), param.device());
  state.made.push_back(name);
  return state.slots[name] = std::move(made);
}

bool Optimizer::fused_path(const Tensor& param, const std::vector<Tensor>& others) {
  const Device dev = param.device();
  if (!(dev.is_cpu() || dev.is_cuda()) || !param.is_contiguous()) return false;
  if (param.dtype() != DType::f32 && param.dtype() != DType::f64) return false;
  for (const Tensor& t : others)
    if (t.device() != dev || !t.is_contiguous() || t.dtype() != param.dtype()) return false;
  return true;
}

void Optimizer::check_capturable_path(const Tensor& param) {
  ZT_CHECK(!graph_capturing(), "optimizer: a captured step updates a parameter (", param.str(),
           ") that the fused kernels do not take (they need a contiguous f32/f64 tensor with "
           "its gradient and state alike on the CPU or a GPU); its constants could not change "
           "between replays");
}

bool Optimizer::fused_copy(const Tensor& copy, const Tensor& param) {
  return copy.defined() && is_16bit_float(copy.dtype()) && copy.is_contiguous() &&
         copy.device() == param.device();
}

NamedTensors Optimizer::state_dict() const {
  NamedTensors out;
  out.emplace_back("step", scalar_tensor(static_cast<double>(step_count_), DType::i64));
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamState& st = state_[i];
    if (st.slots.empty() && st.step == 0) continue;
    const std::string& n = params_[i].first;
    out.emplace_back(n + ".step", scalar_tensor(static_cast<double>(st.step), DType::i64));
    for (const auto& s : slot_names_) {
      auto it = st.slots.find(s);
      if (it != st.slots.end()) out.emplace_back(n + "." + s, it->second);
    }
  }
  return out;
}

void Optimizer::load_state_dict(const NamedTensors& state) {
  check_not_captured("optimizer load_state_dict", "its state tensors' addresses",
                     "load the state before the warm-up steps");
  // Expected keys -> (param index, slot name; "" for the per-param step).
  std::unordered_map<std::string, std::pair<size_t, std::string>> expected;
  for (size_t i = 0; i < params_.size(); ++i) {
    expected[params_[i].first + ".step"] = {i, ""};
    for (const auto& s : slot_names_) expected[params_[i].first + "." + s] = {i, s};
  }
  std::vector<std::string> unexpected, mismatched;
  std::optional<int64_t> step_count;  // the "step" entry, when it is a step count
  // Per parameter: its step (-1: no "<param>.step") and the slots given.
  std::vector<int64_t> steps(params_.size(), -1);
  std::vector<std::set<std::string>> given(params_.size());
  std::set<std::string> seen, duplicated;  // a key given twice: which one to take?
  for (const auto& [k, t] : state) {
    if (!seen.insert(k).second) {
      duplicated.insert(k);
      continue;
    }
    if (k == "step") {
      const double v = t.defined() && t.numel() == 1 ? t.item() : -1.0;
      if (is_step_count(v)) step_count = static_cast<int64_t>(v);
      continue;
    }
    auto it = expected.find(k);
    if (it == expected.end()) {
      unexpected.push_back(k);
      continue;
    }
    const auto& [i, s] = it->second;
    const Tensor& p = params_[i].second;
    Shape want = s.empty() ? Shape{} : p.sizes();
    if (!t.defined() || t.sizes() != want) {
      mismatched.push_back(k + " (" + (t.defined() ? shape_str(t.sizes()) : "undefined") +
                           ", expected " + shape_str(want) + ")");
    } else if (s.empty()) {
      if (is_step_count(t.item())) {
        steps[i] = static_cast<int64_t>(t.item());
      } else {
        mismatched.push_back(k + " (" + std::to_string(t.item()) +
                             ", expected a whole number >= 0)");
      }
    } else if (!is_floating(t.dtype())) {  // a moment in integers: damaged, or another's
      mismatched.push_back(k + " (" + dtype_name(t.dtype()) + ", expected a floating tensor)");
    } else {
      given[i].insert(s);
    }
  }
  // A slot without its step would restart the bias correction (Adam) at step 1; a step
  // without Adam's moments would take a first step of about lr * 3 per element.
  std::vector<std::string> incomplete;
  for (size_t i = 0; i < params_.size(); ++i) {
    std::vector<std::string> lacking;
    if (steps[i] > 0 && slots_required())
      for (const auto& s : slot_names_)
        if (!given[i].count(s)) lacking.push_back(s);
    if (steps[i] < 0 && !given[i].empty())
      incomplete.push_back(params_[i].first + " (" + *given[i].begin() + " without step)");
    else if (!lacking.empty())
      incomplete.push_back(params_[i].first + " (step " + std::to_string(steps[i]) + " without " +
                           list_names(lacking) + ")");
  }
  // Unexpected slots of known parameters: the state of another optimizer type (SGD's
  // momentum_buffer where Adam keeps exp_avg and exp_avg_sq).
  std::set<std::string> foreign;
  for (const std::string& k : unexpected)
    if (const size_t dot = k.rfind('.'); dot != std::string::npos && index_.count(k.substr(0, dot)))
      foreign.insert(k.substr(dot + 1));
  std::ostringstream err;
  if (!step_count) err << "\n  missing or malformed 'step' entry (one whole number >= 0)";
  if (!duplicated.empty())
    err << "\n  keys given more than once (" << duplicated.size()
        << "): " << list_names({duplicated.begin(), duplicated.end()});
  if (!unexpected.empty())
    err << "\n  unexpected keys (" << unexpected.size() << "): " << list_names(unexpected);
  if (!foreign.empty())
    err << "\n  the state of another optimizer? it holds "
        << list_names({foreign.begin(), foreign.end()}) << " per parameter, where this " << who()
        << " keeps " << (slot_names_.empty() ? "none" : list_names(slot_names_));
  if (!mismatched.empty())
    err << "\n  shape or value mismatches (" << mismatched.size()
        << "): " << list_names(mismatched);
  if (!incomplete.empty())
    err << "\n  incomplete state (" << incomplete.size() << "): " << list_names(incomplete);
  ZT_CHECK(err.str().empty(), who(), " load_state_dict failed:", err.str(),
           "\n  (was the state saved for the same parameters and partitioning?)");

  // Staged before anything changes: every slot the state needs, the parameter's own where
  // it has one (the same shape, dtype and device), else a new one. Only these allocations
  // can fail (out of memory); one that does leaves the optimizer as it was.
  autograd::NoGradGuard ng;
  std::vector<std::map<std::string, Tensor>> slots(params_.size());
  for (size_t i = 0; i < params_.size(); ++i)
    for (const std::string& s : given[i]) {
      // (A parameter converted in place since, by a module's to(), no longer matches it.)
      const Tensor& p = params_[i].second;
      auto it = state_[i].slots.find(s);
      if (it != state_[i].slots.end() && it->second.sizes() == p.sizes() &&
          it->second.dtype() == p.dtype() && it->second.device() == p.device()) {
        slots[i][s] = it->second;
      } else {
        MemTagScope tag(MemTag::kOptimState);
        slots[i][s] = zeros(p.sizes(), p.dtype(), p.device());
      }
    }
  try {
    for (const auto& [k, t] : state) {
      if (k == "step") continue;
      const auto& [i, s] = expected.at(k);
      if (!s.empty()) slots[i].at(s).copy_(t);
    }
  } catch (const std::exception& e) {  // a copy failed after others were written
    broken_ = std::string("a load_state_dict failed after it had written some of the state (") +
              e.what() + ")";
    throw;
  }
  for (size_t i = 0; i < params_.size(); ++i) {  // state, not settings
    state_[i].slots = std::move(slots[i]);
    state_[i].step = std::max<int64_t>(steps[i], 0);
  }
  step_count_ = *step_count;
  broken_.clear();  // the loaded state is whole
}

}  // namespace zt::optim
