// Engine's refusals: what step(), capture, a replay and construction check before they
// change anything (the engine itself is in engine.cpp).
#include <cstdio>
#include <map>
#include <set>

#include "zero/engine.h"
#include "zero/hooks.h"

namespace zt::zero {

void Engine::check_no_stray_gradient() const {
  const std::string& p = hooks_->stray_gradient();
  ZT_CHECK(p.empty(), "zero::Engine: a gradient reached '", p, "' (of this engine's ",
           model_->type_name(),
           ") outside engine.backward(loss): a plain loss.backward(), or another engine's "
           "backward through this model (a GAN's generator loss through its discriminator)? "
           "Under the engine every backward goes through engine.backward(loss), which scales "
           "the loss and reduces the gradients; that gradient is kept for the step now (in "
           "the shards, which Module::zero_grad() cannot reach, or a trainable replica's "
           ".grad()), so the next step would apply it: engine.discard_gradients() drops it (and "
           "the rest of the "
           "window); call it after each backward that is not this engine's");
}

void Engine::check_rank_count(const NamedTensors& named) const {
  for (const auto& [name, p] : named)
    if (const ZeroParam* z = zero_param(p); z && z->kind == ParamKind::kPartitioned)
      ZT_CHECK(z->part.world == comm_.size() && z->rank == comm_.rank(),
               "zero::Engine: parameter '", name, "' is partitioned over ", z->part.world,
               " ranks, as rank ", z->rank, "; this engine's communicator has ", comm_.size(),
               " (this is its rank ", comm_.rank(),
               "): build the engine on the communicator its zero::Init partitioned it on");
}

void Engine::check_model_unchanged() {
  if (nn::registration_count() == registrations_) return;
  std::set<const TensorImpl*> known;
  for (const NamedParam& np : params_) known.insert(np.param.impl());
  for (const auto& [name, p] : replicas_) known.insert(p.impl());
  for (const auto& [name, p] : model_->named_parameters())
    ZT_CHECK(known.count(p.impl()) || !p.requires_grad(), "zero::Engine::step: '", name,
             "' was registered (or replaced) after the engine was built, so nothing would "
             "train it: the engine partitions, reduces and updates the parameters it was built "
             "with. Build the whole model first (a new engine for each phase that adds modules)");
  registrations_ = nn::registration_count();
}

void Engine::note_stale_copies() {
  for (NamedParam& np : params_) {
    const bool held = zero_param(np.param)->stale_copy_held();
    if (!held || comm_.rank() != 0 || config_.quiet || !stale_noted_.insert(np.name).second)
      continue;
    std::fprintf(stderr,
                 "zt: a tensor made from parameter '%s' (of this engine's %s) outlived the call "
                 "that gathered it (a view, detach() or transpose kept in a member or a list) "
                 "and still holds the values from before this step: under ZeRO-3 each call "
                 "gathers a fresh copy, which the step's update reaches and a kept tensor does "
                 "not. Derive it inside each call, or clone() it for a snapshot (a graph kept "
                 "with retain_graph past the step holds such copies too)\n",
                 np.name.c_str(), model_->type_name().c_str());
  }
}

void Engine::check_trainable_unchanged() const {
  auto changed = [](const std::string& name, bool was) {
    ZT_FAIL("zero::Engine::step: '", name, "' was ", was ? "trainable" : "frozen",
            " when the engine was built and now has requires_grad ", was ? "false" : "true",
            "; which parameters train is fixed when an engine is built: set requires_grad "
            "before building it (a new engine for each phase of a freezing schedule)");
  };
  for (const NamedParam& np : params_)
    if (zero_param(np.param)->grad_shard.defined() != np.param.requires_grad())
      changed(np.name, zero_param(np.param)->grad_shard.defined());
  for (size_t i = 0; i < replicas_.size(); ++i)
    if (replica_trains_[i] != replicas_[i].second.requires_grad())
      changed(replicas_[i].first, replica_trains_[i]);
}

std::string Engine::capture_blocker() const {
  if (comm_.size() > 1)
    return "it runs on " + std::to_string(comm_.size()) +
           " ranks, and NCCL's collectives are not captured (one rank only)";
  if (config_.gradient_accumulation_steps > 1)
    return "gradient_accumulation_steps is " + std::to_string(config_.gradient_accumulation_steps) +
           " (a graph holds one whole step; set it to 1)";
  if (scaler_.active())
    return "fp16 loss scaling decides on the host whether to skip a step (use bf16)";
  if (offload_->moves()) return "offload_optimizer updates on the host";
  if (timeline_ && !timeline_written_) return "a timeline (train.trace) is being recorded";
  return "";
}

void Engine::check_capturable() const {
  if (std::string why = capture_blocker(); !why.empty())
    ZT_FAIL("zero::Engine: the step cannot be captured in a CUDA graph: ", why,
            ". Train without cuda_graph, or change that setting");
  ZT_CHECK(optimizer_->capturable(),
           "zero::Engine: a step is being captured in a CUDA graph "
           "but the engine is not capturable: call set_capturable(true) before the warm-up steps");
}

void Engine::before_replay() {
  // A replay is a step: what step() refuses before it changes anything (checked in the
  // captured step once, at the capture) is refused before each replay too.
  check_trainable_unchanged();
  check_model_unchanged();
  if (!capture_counted_) {
    ++stats_.micro_steps;
    ++stats_.steps;
  }
  capture_counted_ = false;
  optimizer_->before_replay();
}

void Engine::check_buffer_policies() const {
  // Buffers are named by their module's first path (named_buffers()): a policy names that.
  std::set<std::string> paths;
  std::map<const nn::Module*, std::string> first;
  for (const auto& [path, m] : model_->named_modules("", /*remove_duplicate=*/true)) {
    paths.insert(path);
    first.emplace(m.get(), path);
  }
  for (const auto& [name, b] : buffers_) paths.insert(name);
  std::map<std::string, const nn::Module*> second;  // another path of a module named above
  for (const auto& [path, m] : model_->named_modules("", /*remove_duplicate=*/false))
    if (!paths.count(path)) second.emplace(path, m.get());
  std::set<std::string> named;
  for (const BufferPolicy& p : config_.buffers.modules) {
    ZT_CHECK(named.insert(p.module).second, "zero::Config: buffers.modules names '", p.module,
             "' twice; the later entry would win without a word. Keep one");
    if (p.module.empty() || paths.count(p.module)) continue;
    ZT_CHECK(!second.count(p.module), "zero::Config: buffers.modules names '", p.module,
             "', a second path of module '", first[second[p.module]],
             "' (registered twice), whose buffers go by the first: name '", first[second[p.module]],
             "'");
    ZT_FAIL("zero::Config: buffers.modules names '", p.module,
            "', which is no module or buffer of the model (paths are dotted, as in ",
            buffers_.empty() ? std::string("named_modules()") : "'" + buffers_.front().first + "'",
            "), so its policy would apply to nothing");
  }
}

}  // namespace zt::zero
