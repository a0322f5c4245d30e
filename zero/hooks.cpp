// The life of a partitioned parameter, in order. Before any of this, a scope
// (zero::Init) or the engine partitioned it: each rank holds a flat shard, the tensor
// has no storage (NOT_AVAILABLE). Then, every step:
//
//   1. on_pre_forward    its module is called: gather it (one all-gather per module),
//                        prefetch the next modules along the trace, wait.
//   2. (forward)         the module computes with the full parameter.
//   3. on_post_forward   release it, unless the trace reuses it soon. The outputs are
//                        wrapped so that step 4 runs when their gradients arrive.
//   4. on_pre_backward   gradients reach the module's outputs: check that no step
//                        changed it since the forward, gather it again.
//   5. (backward)        the module's backward runs; autograd accumulates the full
//                        gradient into .grad().
//   6. on_grad_ready     the gradient is final: the reducer queues it and, per bucket,
//                        reduce-scatters every rank's slice into its fp32 grad shard.
//   7. on_post_backward  gradients reached the module's inputs: release it.
//   8. on_backward_end   autograd is done: flush the last bucket, release what is left
//                        (modules whose inputs needed no gradient never see step 7).
//   9. Engine::step      the optimizer updates the fp32 shard; low-precision shards are
//                        rounded from it; persistent parameters are gathered again.
//
// A persistent parameter (at most stage3_param_persistence_threshold elements) stays
// gathered: a module holding only those skips 7, and of 4 keeps only the check that the
// parameters did not change since the forward (at more than one rank; at one, autograd's
// own check of saved tensors sees the step's in-place write of the shard).
#include "zero/hooks.h"

#include <algorithm>

namespace zt::zero {

// Replaces the tensors of `ts` that require grad by identity outputs of one autograd
// function whose backward calls `on_backward` (once, when all their gradients are in).
// Two of them a module a step: their names stay within a std::string's inline 15
// characters, which the node and its closure copy.
static void wrap_for_backward(const char* name, std::vector<Tensor>& ts,
                              std::function<void()> on_backward) {
  if (!autograd::grad_mode_enabled()) return;
  std::vector<size_t> idx;
  std::vector<Tensor> wrap;
  for (size_t i = 0; i < ts.size(); ++i)
    if (ts[i].defined() && ts[i].requires_grad()) {
      idx.push_back(i);
      wrap.push_back(ts[i]);
    }
  if (wrap.empty()) return;
  auto out = autograd::apply_function(
      name, wrap, [](const std::vector<Tensor>& x) { return x; },
      [on_backward = std::move(on_backward)](const std::vector<Tensor>& g) {
        on_backward();
        return g;
      });
  for (size_t k = 0; k < idx.size(); ++k) ts[idx[k]] = out[k];
}

Hooks::Hooks(nn::Module& model, Coordinator& coordinator, GradReducer& reducer,
             const std::vector<Tensor>& trainable, const std::vector<Tensor>& trainable_replicas,
             std::function<void(const std::exception&)> on_forward_error)
    : coordinator_(coordinator), reducer_(reducer) {
  // First, so that it runs before the root group's own fetch.
  module_hooks_.emplace_back(
      &model, model.add_forward_pre_hook(
                  [this](nn::Module&, std::vector<Tensor>&) { coordinator_.on_model_call(); },
                  /*outer=*/true));
  module_hooks_.emplace_back(
      &model, model.add_forward_error_hook(
                  [this, on_error = std::move(on_forward_error)](nn::Module&) {
                    coordinator_.abandon_trace();
                    try {
                      throw;  // the forward's error, which the module rethrows after its hooks
                    } catch (const std::exception& e) {
                      on_error(e);
                    } catch (...) {
                    }
                  },
                  /*outer=*/true));
  const auto& groups = coordinator_.groups();
  for (int id = 0; id < static_cast<int>(groups.size()); ++id) {
    const auto& ps = groups[id].params;
    // At one rank a gathered parameter is its shard, which a step writes in place: autograd's
    // own check of saved tensors finds a graph older than the step there.
    wraps_.push_back(
        !std::all_of(ps.begin(), ps.end(), [](const ZeroParam* z) { return z->persistent; })
            ? kGatherRelease
        : ps.front()->part.world > 1 ? kCheckOnly
                                     : kNone);
    nn::Module* m = groups[id].module;
    module_hooks_.emplace_back(
        m, m->add_forward_pre_hook(
               [this, id](nn::Module&, std::vector<Tensor>& inputs) { on_pre_forward(id, inputs); },
               /*outer=*/true));
    module_hooks_.emplace_back(
        m, m->add_forward_hook(
               [this, id](nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>& outputs) {
                 on_post_forward(id, outputs);
               },
               /*outer=*/true));
    module_hooks_.emplace_back(
        m, m->add_forward_error_hook([this, id](nn::Module&) { on_forward_failed(id); },
                                     /*outer=*/true));
  }
  for (const Tensor& p : trainable)
    grad_hooks_.emplace_back(
        p, p.register_post_accumulate_grad_hook([this](const Tensor& q) { on_grad_ready(q); }));
  // A trainable replica's gradient stays in its .grad() until the step; one that got there
  // outside Engine::backward (unscaled, not averaged over the accumulation) is only noted.
  for (const Tensor& p : trainable_replicas)
    grad_hooks_.emplace_back(p, p.register_post_accumulate_grad_hook([this](const Tensor& q) {
      if (!in_engine_backward_ && stray_.empty()) stray_ = q.name();
    }));
}

void Hooks::begin_compute(std::vector<int64_t>& begins, int id) {
  Timeline* t = coordinator_.timeline();
  if (!t || !t->active()) return;
  if (begins.empty()) begins.assign(coordinator_.groups().size(), -1);
  begins[id] = Timeline::now_ns();
}

void Hooks::end_compute(std::vector<int64_t>& begins, Track track, int id) {
  Timeline* t = coordinator_.timeline();
  if (!t || begins.empty() || begins[id] < 0) return;
  const std::string& path = coordinator_.groups()[id].path;
  t->span(track, path, begins[id], "\"module\":" + json_quote(path));
  begins[id] = -1;
}

Hooks::~Hooks() {
  for (auto& [m, id] : module_hooks_) m->remove_hook(id);
  for (auto& [p, id] : grad_hooks_) p.remove_post_accumulate_grad_hook(id);
}

// 1.
void Hooks::on_pre_forward(int id, std::vector<Tensor>& inputs) {
  coordinator_.fetch(id, /*backward_phase=*/false);
  begin_compute(forward_begin_, id);
  // Step 7's trigger: when the gradients of this module's inputs are ready, its backward
  // is over.
  if (wraps_[id] == kGatherRelease)
    wrap_for_backward("zero_release", inputs, backward_hook(&Hooks::on_post_backward, id));
}

// 3.
void Hooks::on_post_forward(int id, std::vector<Tensor>& outputs) {
  end_compute(forward_begin_, Track::kForward, id);
  coordinator_.log("forward_end:", id);
  // An output that is a partitioned parameter itself (a table handed out whole) would lose
  // its storage at the release below: it leaves as a view, which keeps the gathered values.
  for (Tensor& out : outputs)
    if (out.defined() && is_partitioned(out)) out = out.view(out.sizes());
  // Step 4's trigger: gradients reaching this module's outputs mean its backward is next.
  // It also checks that the parameters are still those this forward computed with.
  if (wraps_[id] != kNone)
    wrap_for_backward(wraps_[id] == kGatherRelease ? "zero_gather_bwd" : "zero_check_bwd", outputs,
                      backward_hook(&Hooks::on_pre_backward, id, values_version(id)));
  coordinator_.release(id);
}

std::function<void()> Hooks::backward_hook(void (Hooks::*step)(int, uint64_t), int id,
                                           uint64_t version) {
  return [alive = std::weak_ptr<Hooks*>(alive_), step, id, version] {
    const std::shared_ptr<Hooks*> hooks = alive.lock();
    ZT_CHECK(hooks,
             "this backward reaches a forward that ran through a zero::Engine that has "
             "been destroyed (its gathers and gradient shards went with it): run the "
             "forward again through the engine that trains the model, and keep that "
             "engine alive until its step");
    ((*hooks)->*step)(id, version);
  };
}

// Every write of a parameter's values (the optimizer's update, a load, a modifier scope's
// edit) writes its shard, whose storage version moves; a gathered copy is new at each
// gather, so its own version says nothing.
uint64_t Hooks::values_version(int id) const {
  uint64_t sum = 0;
  for (const ZeroParam* z : coordinator_.groups()[id].params)
    if (z->shard.has_storage()) sum += z->shard.storage()->version();
  return sum;
}

// 3, when the forward threw: the group is no longer in use, and the step's trace cannot
// be trusted (a retried forward starts over).
void Hooks::on_forward_failed(int id) {
  if (!forward_begin_.empty()) forward_begin_[id] = -1;
  coordinator_.abandon(id);  // allocates nothing, waits for nothing: cannot fail
}

// 4.
void Hooks::on_pre_backward(int id, uint64_t forward_version) {
  // The forward's saved activations belong to the weights it gathered; new weights would be
  // paired with them without a word, where a plain model's saved weights, written in place
  // by its step, make autograd refuse.
  ZT_CHECK(values_version(id) == forward_version, "backward through a call of module '",
           coordinator_.groups()[id].path,
           "' made before an optimizer step, a load or an edit changed its parameters: the "
           "activations that call saved belong to the old values, and its gradients would pair "
           "them with the new ones. Run the forward again after the step (a graph kept with "
           "retain_graph serves backwards before the step only; a plain model refuses this too, "
           "as its step writes the weights it saved in place)");
  if (wraps_[id] != kGatherRelease) return;  // its parameters persist: nothing to gather
  if (!end_of_backward_queued_) {
    end_of_backward_queued_ = true;
    autograd::queue_callback([this] { on_backward_end(); });
  }
  // A plain loss.backward() on some ranks only meets the others' next collective: its
  // gathers say where they come from in the mismatch.
  comm::CollectiveLabel label(in_engine_backward_ ? comm::CollectiveLabel::current()
                                                  : "a backward outside engine.backward(loss)");
  coordinator_.fetch(id, /*backward_phase=*/true);
  begin_compute(backward_begin_, id);
}

// 6.
void Hooks::on_grad_ready(const Tensor& param) {
  if (!in_engine_backward_ && stray_.empty()) stray_ = param.name();
  reducer_.add(param);
}

// 7.
void Hooks::on_post_backward(int id, uint64_t) {
  end_compute(backward_begin_, Track::kBackward, id);
  coordinator_.release(id);
}

// 8.
void Hooks::on_backward_end() {
  end_of_backward_queued_ = false;
  for (int id = 0; id < static_cast<int>(backward_begin_.size()); ++id)
    end_compute(backward_begin_, Track::kBackward, id);
  coordinator_.release_all();
  reducer_.flush();
}

void Hooks::abandon_backward() {
  end_of_backward_queued_ = false;
  stray_.clear();  // discard_gradients() dropped what it brought
  std::fill(backward_begin_.begin(), backward_begin_.end(), -1);
  coordinator_.abandon_step();
}

}  // namespace zt::zero
