// Optimizer: the base of SGD and Adam/AdamW. It owns a list of named fp32 tensors —
// whole parameters, or the flat master shards the ZeRO engine hands it after setting
// their .grad() — and per-tensor state (moments, step), which it can save and load
// by name ("<param>.exp_avg", ...). It knows nothing of modules or ranks. Subclasses
// update many parameters at once (update_many: one fused kernel launch per group on the
// GPU) and can write a low-precision copy of each updated parameter in the same pass.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/ops.h"

namespace zt::optim {

using ::zt::NamedTensors;

/// A parameter's own hyper-parameters (what PyTorch keeps per param_group): its learning
/// rate as a multiple of the optimizer's (which a schedule sets each step), and its weight
/// decay.
struct ParamSettings {
  double lr_scale = 1.0;
  double weight_decay = 0.0;
};

class Optimizer {
 public:
  /// `params`: unique names, floating tensors updated in place; `weight_decay`: every
  /// parameter's to begin with; `slots`: the state names this optimizer keeps per
  /// parameter (e.g. {"exp_avg", "exp_avg_sq"}).
  Optimizer(NamedTensors params, double lr, double weight_decay, std::vector<std::string> slots);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter whose grad is defined (others are skipped). A step
  /// that fails before it changed a parameter (out of memory for the first step's state)
  /// is as if not called, and can be called again; one that fails after (a later group's
  /// kernel refused on a GPU) leaves parameters and state part-updated, and every later
  /// step() refuses until load_state_dict() restores a whole state.
  void step();
  /// Sets every parameter's grad to undefined.
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr);
  /// Makes every later step that updates parameter `name` also write its new value into
  /// `copy` (floating, contiguous, the parameter's numel and device), rounded as
  /// Tensor::to rounds; fused kernels write bf16/f16 copies in the update's own pass.
  /// An undefined `copy` stops it.
  void set_low_precision_copy(const std::string& name, Tensor copy);
  /// Gives the parameters named `names` settings of their own (a group with another
  /// learning rate or weight decay); the others keep theirs. An unknown name is an error
  /// listing them. Refused once a step was captured in a CUDA graph (which holds them).
  void set_settings(const std::vector<std::string>& names, const ParamSettings& s);
  /// Makes the parameters named `names` take no weight decay (biases and norm scales, as
  /// GPT-2-style training leaves them), keeping their learning rates.
  void exclude_from_weight_decay(const std::vector<std::string>& names);
  /// Parameter `name`'s settings.
  const ParamSettings& settings(const std::string& name) const;
  /// Number of step() calls so far.
  int64_t step_count() const { return step_count_; }
  /// False after a step failed part-way (see step()): the parameters and the state no
  /// longer agree, so neither should be saved; load_state_dict() makes it true again.
  bool consistent() const { return broken_.empty(); }

  /// The optimizer's type ("Adam", "AdamW", "SGD"): a checkpoint records it, and a state
  /// saved by another type is refused. Empty by default, so that an optimizer written
  /// outside zt needs none (the engine builds only zt's, optim/factory.h).
  virtual std::string kind() const { return {}; }
  /// Its hyper-parameters by name (betas, eps, momentum, ...), recorded beside kind().
  virtual std::map<std::string, double> hyper_parameters() const { return {}; }

  /// Capturable mode, for steps captured in a CUDA graph (core/cuda/graph.h): the
  /// per-step constants (learning rate, bias corrections, SGD's first-step flag) reach
  /// the update kernels through a small f64 tensor per group of parameters, written by a
  /// fill before the update, instead of as kernel arguments. A replayed step then reads
  /// the values written for it: call before_replay() before each replay. The updates are
  /// bit-identical to the default mode's. Off by default (it costs a few fills a step).
  void set_capturable(bool on) { capturable_ = on; }
  bool capturable() const { return capturable_; }
  /// Before a replay of the step captured last: counts it (the capture itself counted
  /// the first replay), as a write of each parameter (and low-precision copy) it updates
  /// too, and writes its constants with the current learning rate.
  void before_replay();
  const NamedTensors& params() const { return params_; }

  /// "step" (i64 scalar, step_count) and, for every parameter with state,
  /// "<param>.step" (i64 scalar) and "<param>.<slot>" (param-shaped). Tensors are the
  /// optimizer's own; clone them to snapshot.
  NamedTensors state_dict() const;
  /// Restores a state_dict() (values copied, each slot converted to its parameter's
  /// floating dtype, as PyTorch casts a loaded state). Unknown keys, shape mismatches, slots
  /// that are not floating, incomplete per-parameter state (slots without "<param>.step";
  /// where slots_required(), a step > 0 without every slot), keys given twice and slots of
  /// another optimizer type are reported together, by name, in one error. The state holds
  /// no type: Adam's and AdamW's are alike, and load into each other (as in PyTorch); a
  /// zero::save_checkpoint records kind() and its load refuses another. A refused load, or one
  /// whose new state tensors cannot be allocated, leaves the optimizer as it was; state tensors it
  /// already holds that still match their parameter's shape, dtype and device (not after a
  /// module's to() converted it) are written in place (a state_dict() taken before, not cloned,
  /// shows the loaded values). Refused once a step was captured in a CUDA graph (the graph holds
  /// the state's addresses).
  void load_state_dict(const NamedTensors& state);

 protected:
  /// kind(), or "optimizer" where it is empty: what errors call this optimizer.
  std::string who() const;
  /// `lr` when it is a learning rate (finite, >= 0), else an error naming `who` (the
  /// optimizer's kind()) and the value. Subclasses check their options' lr with it before
  /// the base is made.
  static double checked_lr(const std::string& who, double lr);
  /// Per-parameter state: slot tensors (created on first use) and the number of updates,
  /// and the parameter's settings (loading state keeps them).
  struct ParamState {
    std::map<std::string, Tensor> slots;
    int64_t step = 0;
    ParamSettings settings;
    /// The slots slot() made during the step under way (a failed step takes them back).
    std::vector<std::string> made;
  };
  /// True when a parameter that has taken a step holds every slot (Adam's moments); false
  /// when a slot may be missing (SGD's momentum buffer: the next step is then a first one).
  virtual bool slots_required() const { return false; }
  /// Updates `param` in place from `grad` (same shape, device; already counted in
  /// state.step). Called under NoGradGuard.
  virtual void update(const Tensor& param, const Tensor& grad, ParamState& state) = 0;
  /// Updates params[i] from grads[i] with states[i] (each counted) and writes copies[i]
  /// when defined. Default: update() and a copy per parameter; Adam and SGD override it
  /// to run fused kernels over groups of parameters. Called under NoGradGuard.
  virtual void update_many(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                           const std::vector<ParamState*>& states,
                           const std::vector<Tensor>& copies);
  /// The slot tensor, created as zeros like `param` if absent (`created` tells which).
  static Tensor& slot(ParamState& state, const std::string& name, const Tensor& param,
                      bool* created = nullptr);
  /// True when the kernel table's optimizer kernels take this parameter: on the CPU or
  /// a GPU, contiguous, f32/f64, `others` (gradient, slots) alike.
  static bool fused_path(const Tensor& param, const std::vector<Tensor>& others);
  /// Throws while a CUDA graph is being captured: a parameter off the fused path gets its
  /// step constants as host arguments, which every replay would repeat.
  static void check_capturable_path(const Tensor& param);
  /// True when those kernels can write `copy` in their pass: a contiguous bf16/f16
  /// tensor on the parameter's device.
  static bool fused_copy(const Tensor& copy, const Tensor& param);
  /// Writes `copy` (if defined) from the updated `param`.
  static void write_copy(const Tensor& copy, const Tensor& param);
  /// update_many calls it just before it first changes a parameter (a fused launch, an
  /// update()): a step that fails after that cannot be taken back (see step()).
  void updating() { updated_some_ = true; }
  /// In capturable mode, the constants tensor of the `group`-th fused call of a step (on
  /// `device`, make().size() f64 values), written now from make(); while a graph is
  /// captured it is not written: before_replay() writes make() before each replay.
  /// Undefined when not capturable (the kernels take the arguments).
  Tensor step_constants(size_t group, Device device, std::function<std::vector<double>()> make);

  /// What a fused optimizer gives update_fused for one parameter: its slot tensors in the
  /// kernel's order (an undefined one, as SGD's buffer without momentum, is left out), and
  /// a step key (Adam: the step count; SGD: the first-step flag).
  struct FusedEntry {
    std::vector<Tensor> slots;
    int64_t step_key = 0;
  };
  /// The parameters of one fused kernel call: one device, dtype, in-pass copy dtype, step
  /// key and settings. slots[k] holds the k-th slot of each parameter that has one.
  struct FusedGroup {
    std::vector<Tensor> p, g, copy;
    std::vector<std::vector<Tensor>> slots;
    const ParamState* state = nullptr;  // the first parameter's (its step and settings)
    int64_t step_key = 0;
  };
  /// update_many for an optimizer with fused kernels (Adam, SGD). Per parameter i,
  /// entry(i) gives its slots; a parameter the kernels cannot take (fused_path) is
  /// updated at once by fallback(i, entry) and its copy written. The others are grouped
  /// (in a fixed order of the group keys); per group, in turn, the constants from
  /// constants(group) are prepared (step_constants) and run(group, on_device) launches
  /// the kernel. Copies the kernels cannot write in their pass are written last.
  void update_fused(
      const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
      const std::vector<ParamState*>& states, const std::vector<Tensor>& copies,
      const std::function<FusedEntry(size_t i)>& entry,
      const std::function<void(size_t i, const FusedEntry& e)>& fallback,
      const std::function<std::function<std::vector<double>()>(const FusedGroup&)>& constants,
      const std::function<void(const FusedGroup&, const Tensor& on_device)>& run);

 private:
  NamedTensors params_;
  std::vector<ParamState> state_;
  bool updated_some_ = false;  // in this step, updating() was called
  // How an earlier step (or load) left the state part-updated ("" when none did).
  std::string broken_;
  std::vector<Tensor> copies_;  // per parameter: its low-precision copy, or undefined
  std::unordered_map<std::string, size_t> index_;
  /// The index of parameter `name`; an unknown name is an error saying `what` needed it.
  size_t index_of(const std::string& name, const char* what) const;
  /// An error listing the names in `names` that name no parameter, saying `what` needed them.
  void check_known(const std::vector<std::string>& names, const char* what) const;
  /// An error, from `op`, once a step was captured in a CUDA graph, which holds `held`
  /// (the settings, the state's addresses); `instead` says what to do.
  void check_not_captured(const char* op, const char* held, const char* instead) const;
  /// Takes back a step that failed before it updated any parameter: the step counters,
  /// the slots it made (ParamState::made) and, when `capturing`, the captured step's records.
  void undo_step(const std::vector<ParamState*>& states, bool capturing);
  std::vector<std::string> slot_names_;
  double lr_;
  int64_t step_count_ = 0;
  bool capturable_ = false;
  std::vector<Tensor> constants_;  // per fused group: its step constants (capturable)
  // The captured step: its constant makers (by group), its states, and whether the
  // capture's own count of the step is still unreplayed.
  std::vector<std::function<std::vector<double>()>> replay_makers_;
  std::vector<ParamState*> replay_states_;
  std::vector<Tensor> replay_writes_;  // the tensors it updates (parameters, their copies)
  bool capture_counted_ = false;
};

}  // namespace zt::optim
