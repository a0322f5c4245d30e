// The engine's hooks: where the life of a partitioned parameter is driven from, in the
// order it happens (hooks.cpp reads top to bottom in that order). Installed on every
// module that owns partitioned parameters and on every trainable parameter; removed by
// id when the Hooks object goes, so a model may outlive its engine.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "zero/coordinator.h"
#include "zero/reducer.h"

namespace zt::zero {

class Hooks {
 public:
  /// Hooks every group of `coordinator`, every parameter in `trainable` (partitioned,
  /// with a gradient shard), and `model`'s failures: a failed forward abandons the step's
  /// trace (also one that fails outside every group, in the model's own code) and is
  /// handed to `on_forward_error`.
  Hooks(nn::Module& model, Coordinator& coordinator, GradReducer& reducer,
        const std::vector<Tensor>& trainable, const std::vector<Tensor>& trainable_replicas,
        std::function<void(const std::exception&)> on_forward_error);
  ~Hooks();
  Hooks(const Hooks&) = delete;
  Hooks& operator=(const Hooks&) = delete;

  /// Engine::backward runs its backward between set_in_engine_backward(true) and (false).
  void set_in_engine_backward(bool on) { in_engine_backward_ = on; }
  /// The first parameter a gradient reached outside Engine::backward (a plain
  /// loss.backward()), empty if none did: that gradient went into the shards unscaled.
  const std::string& stray_gradient() const { return stray_; }
  /// A backward whose end-of-backward callback will not run (it threw, or its gradients
  /// are discarded): the next backward queues its own, the groups left gathered are
  /// released and the step's trace is abandoned.
  void abandon_backward();

 private:
  void on_pre_forward(int id, std::vector<Tensor>& inputs);
  void on_post_forward(int id, std::vector<Tensor>& outputs);
  void on_forward_failed(int id);
  // `forward_version`: values_version(id) when the call's forward ended.
  void on_pre_backward(int id, uint64_t forward_version);
  void on_grad_ready(const Tensor& param);
  void on_post_backward(int id, uint64_t);
  void on_backward_end();
  // The backward hook of group `id`'s wrapped tensors: `step` (on_pre_backward or
  // on_post_backward) with `version` while these hooks live; an error once they are gone (a
  // graph kept past its engine, whose coordinator and reducer went with it).
  std::function<void()> backward_hook(void (Hooks::*step)(int, uint64_t), int id,
                                      uint64_t version = 0);
  // The sum of the storage versions of group `id`'s shards: it moves whenever their values
  // are written.
  uint64_t values_version(int id) const;
  // The timeline's compute spans (no-ops when the coordinator records none).
  void begin_compute(std::vector<int64_t>& begins, int id);
  void end_compute(std::vector<int64_t>& begins, Track track, int id);

  Coordinator& coordinator_;
  GradReducer& reducer_;
  std::vector<std::pair<nn::Module*, int>> module_hooks_;  // (module, hook id)
  std::vector<std::pair<Tensor, int>> grad_hooks_;         // (parameter, hook id)
  // Per group: whether its backward has anything to gather and release (steps 4 and 7).
  // A group whose parameters are all persistent stays gathered, so its inputs are not
  // wrapped, nor (at one rank) its outputs: two autograd nodes a call fewer. At more ranks
  // its outputs are, to check that a backward meets the weights its forward used (step 4).
  enum Wrap : char { kNone, kCheckOnly, kGatherRelease };
  std::vector<Wrap> wraps_;
  bool end_of_backward_queued_ = false;
  bool in_engine_backward_ = false;
  std::string stray_;
  std::vector<int64_t> forward_begin_, backward_begin_;  // per group; -1: not computing
  // Expires with these hooks; the backward hooks of recorded graphs hold it weakly.
  std::shared_ptr<Hooks*> alive_ = std::make_shared<Hooks*>(this);
};

}  // namespace zt::zero
