// zero::Engine: ZeRO-3 training of one model on one communicator. It takes a model
// (built under zero::Init, or plain — then it is partitioned now), gives each managed
// parameter its record (zero/param.h: shard, fp32 master, fp32 gradient shard), and
// drives the life of a parameter through its parts:
//   zero/hooks.h        when: the hooks, in the order of a parameter's life
//   zero/coordinator.h  what is gathered: fetch, prefetch along the trace, release
//   zero/reducer.h      bucketed reduce-scatter of final gradients into the grad shards
//   zero/loss_scaler.h  fp16 loss scaling
//   zero/offload.h      offload_optimizer: fp32 masters and optimizer state on the host
// and the step here: clipping and the optimizer (optim/factory.h) on fp32 shards.
// Replicated modules get no hooks; buffers are replicated and kept identical on every rank.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/norm.h"
#include "optim/factory.h"
#include "optim/optim.h"
#include "zero/buffer_writes.h"
#include "zero/comm/communicator.h"
#include "zero/config.h"
#include "zero/coordinator.h"
#include "zero/loss_scaler.h"
#include "zero/memory_report.h"
#include "zero/offload.h"
#include "zero/param.h"
#include "zero/reducer.h"
#include "zero/timeline.h"
#include "zero/trace.h"

namespace zt::zero {

/// The optimizer settings (optim/factory.h), under the name the apps use.
using OptimizerConfig = optim::OptimizerConfig;

class Hooks;

class Engine {
 public:
  /// Takes over `model`, built under zero::Init or plain (its parameters are partitioned
  /// now), each rank with its own model object (one shared by thread ranks is an error).
  /// Checks `config` (check_config), puts the edits of an open GatheredParameters modifier
  /// scope on every rank (its copies are gathered again here; an edit of a parameter in
  /// an open read-only scope is refused, naming it), broadcasts rank 0's replicas
  /// and buffers, and ends by verifying that the replicas agree. Refuses a trainable f64 parameter
  /// and a trainable 16-bit replica (both would train at a lower precision than they show), and a
  /// trainable parameter that already holds a gradient (its first step would add it in). Every rank
  /// constructs its engine together.
  Engine(std::shared_ptr<nn::Module> model, comm::Communicator& comm, Config config,
         OptimizerConfig optimizer);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Calls the model under the activation memory tag (what memory_report() counts as
  /// activations); otherwise as calling the model directly, whose hooks do the gathering.
  /// First throws the failure of a GatheredParameters exit that a destructor kept
  /// (GatheredParameters::raise_failed_exit), as step() does.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs);
  Tensor operator()(const Tensor& x) { return forward({x})[0]; }
  /// loss.backward() scaled by 1 / gradient_accumulation_steps (and the fp16 loss scale).
  /// retain_graph keeps the graph for another backward through it, as in PyTorch.
  /// A backward that throws (out of memory, an error in a backward function) discards the
  /// accumulation window as discard_gradients() does, so the engine goes on with the
  /// next batch; with more than one rank it also aborts the communicator with the cause,
  /// because the other ranks' collectives can no longer be matched.
  void backward(const Tensor& loss, bool retain_graph = false);
  /// Drops every gradient since the last optimizer step (the whole accumulation window:
  /// queued and in-flight buckets, the gradient shards, the replicas' gradients, and the
  /// .grad() of a parameter frozen when the engine was built and unfrozen since), and
  /// releases the gathered parameters and starts the step's prefetch trace over; the next
  /// backward starts a new window. For a caller that catches an error from its step,
  /// wherever it came from (the engine's own failures discard already; one in the loss,
  /// between forward and backward, leaves the trace holding a forward that a retry would
  /// repeat), or wants a step undone before it is taken. Every rank calls it.
  void discard_gradients();
  /// Flushes queued gradient buckets and waits for every reduce-scatter; afterwards each
  /// rank's gradient shards hold its slice of the averaged gradients (step() does this).
  void reduce_gradients();
  /// Ends a micro-step; at each gradient_accumulation_steps boundary reduces, clips,
  /// updates and returns true. Needs a backward() since the last step(). Every parameter
  /// trainable when the engine was built is updated, with a zero gradient where none
  /// arrived (a branch this step did not use), as DeepSpeed's ZeRO-3 does: AdamW's
  /// momentum and weight decay still move it. Every rank must have backpropagated through
  /// the same parameters: one small exchange per step compares the ranks' gradient
  /// layouts, and a difference is an error on every rank before the update (the window is
  /// discarded; zero/window_check.h). The same exchange finds a replicated parameter
  /// written outside the engine (a load on one rank), and the replicas are then verified
  /// before the update, whatever buffers.verify_every says. Which parameters train is fixed at
  /// construction: a requires_grad changed since is an error here (build a new engine for
  /// each phase of a freezing schedule), and so is an edit of a parameter (partitioned or
  /// replicated) in a read-only GatheredParameters scope open across it
  /// (GatheredParameters::check_unedited), and so is a scope's exit that failed in its destructor
  /// (GatheredParameters::raise_failed_exit). A refused step changes nothing: mend the cause and
  /// call it again. A step that fails once it has begun (out of memory for the optimizer's state)
  /// discards the window, as a failed backward does; one that fails after the update (re-gathering
  /// persistent parameters) has applied and counted it.
  bool step();

  /// Hashes every replicated parameter and every buffer not under buffers.sync none on
  /// every rank; throws naming the first tensor that differs and which ranks hold which
  /// value. A run that passes counts in stats().replica_verifications, so a caller can tell
  /// whether a step() verified (step() runs it after an applied update that
  /// buffers.verify_every selects, never on a skipped fp16 step).
  void verify_replicas();
  /// Applies the buffer policy now (broadcast / average / none per module path).
  void sync_buffers();

  /// Sets the optimizer's learning rate (>= 0) for the next steps (each parameter group's
  /// lr_scale applies on top).
  void set_lr(double lr);
  /// The learning rate last set (the optimizer's base rate).
  double lr() const;

  /// CUDA graphs (core/step_graph.h): makes the optimizer capturable, so that a step
  /// (forward, backward, reduce, clip, update) captured after warm-up steps replays with
  /// each step's learning rate and counts. Capture needs one rank, no gradient
  /// accumulation, no fp16 loss scaling, no offload_optimizer and no timeline being
  /// recorded; step() says which one stops it.
  void set_capturable(bool on) { optimizer_->set_capturable(on); }
  /// Why a step of this engine cannot be captured ("" when it can).
  std::string capture_blocker() const;
  /// Before each replay of the captured step: refuses it as step() would a model whose
  /// trainable parameters changed since the engine was built, then counts the step (the
  /// capture counted the first) and writes the optimizer's constants for it.
  void before_replay();
  /// The current fp16 loss scale (1 without fp16).
  double loss_scale() const { return scaler_.scale(); }
  /// The fp16 loss scaler (checkpoints save and restore its state).
  LossScaler& loss_scaler() { return scaler_; }
  /// Global gradient norm before clipping at the last step (read back from the
  /// parameters' device: on a GPU this waits for the step, so call it when logging).
  double last_grad_norm() const { return last_grad_norm_.defined() ? last_grad_norm_.item() : 0.0; }
  /// The same norm as one f64 element on the parameters' device, not read back (undefined
  /// before the first step): a loop queues it and reads it when it reads its losses. A
  /// replayed CUDA graph writes each step's norm into this one tensor.
  const Tensor& last_grad_norm_tensor() const { return last_grad_norm_; }
  /// This rank's model-state bytes (on the parameters' device; with offload_optimizer
  /// also the optimizer state's host bytes).
  MemoryReport memory_report() const;
  /// Counters of this rank: steps, gathers, releases, buckets, trace invalidations, skips.
  EngineStats stats() const;
  /// The prefetch trace of training steps (zero/trace.h): its state and the recorded
  /// module order.
  const Trace& trace() const { return coordinator_->trace(); }
  /// The prefetch trace of inference passes (zero/coordinator.h).
  const Trace& inference_trace() const { return coordinator_->inference_trace(); }
  /// When on, records "fetch:<module>", "gather:<module>", "prefetch:<module>",
  /// "forward_end:<module>", "fetch_backward:<module>", "release:<module>" (module paths;
  /// one gather or prefetch per module group).
  void set_event_log(bool on) { coordinator_->set_event_log(on); }
  /// The events recorded while the event log was on, in order.
  const std::vector<std::string>& events() const { return coordinator_->events(); }

  /// Records a timeline (zero/timeline.h) of the next `steps` optimizer steps into `path`
  /// (a Chrome trace event JSON; train.trace). Every rank calls it. When the steps are
  /// done, step() writes the file: rank 0 gathers every rank's events (a collective).
  void set_timeline(const std::string& path, int64_t steps = 2);
  /// Writes the timeline now if it was not written yet (collective; every rank calls it,
  /// e.g. at the end of a run shorter than the traced steps). No-op without a timeline.
  void write_timeline();
  /// The timeline being recorded (null when none or once written). save_checkpoint and
  /// load_checkpoint record their spans on Track::kCheckpoint; apps may add their own with
  /// zero::TimelineSpan(engine.timeline(), zero::Track::kCheckpoint, "export").
  Timeline* timeline() { return timeline_ && !timeline_written_ ? timeline_.get() : nullptr; }

  /// The device the model trains on: its partitioned parameters' (else its replicated
  /// ones', else the CPU).
  Device device() const;
  /// The model the engine trains (its parameters partitioned or replicated).
  nn::Module& module() { return *model_; }
  /// The communicator of the engine's ranks.
  comm::Communicator& comm() { return comm_; }
  /// The optimizer over the fp32 shards and the trainable replicas.
  optim::Optimizer& optimizer() { return *optimizer_; }
  /// The settings the engine was built with (checked).
  const Config& config() const { return config_; }
  /// Optimizer steps applied (an fp16 step skipped for an overflow does not count).
  int64_t global_step() const { return stats_.steps; }
  /// True between windows: no gradient of a new accumulation window yet (after a step()
  /// that returned true, or discard_gradients()); checkpoints are saved there.
  bool at_window_start() const { return micro_ == 0 && backwards_ == 0; }
  /// Sets the applied-step count (global_step()), as a load of a checkpoint saved without
  /// the engine's step counts does.
  void set_global_step(int64_t s) { stats_.steps = s; }
  /// Applied and fp16-skipped steps, as load_checkpoint restores them.
  void set_step_counts(int64_t applied, int64_t skipped) {
    stats_.steps = applied;
    stats_.overflow_skips = skipped;
  }

  /// A partitioned parameter and its dotted name; its state is zero_param(param).
  struct NamedParam {
    std::string name;
    Tensor param;
  };
  /// Partitioned parameters in registration order.
  const std::vector<NamedParam>& partitioned() const { return params_; }
  /// Replicated parameters (name, tensor).
  const std::vector<std::pair<std::string, Tensor>>& replicated() const { return replicas_; }
  /// After master shards were overwritten (checkpoint load): refresh low-precision shards
  /// and gathered persistent copies.
  void refresh_from_master();

 private:
  std::vector<Tensor> average_replica_grads();
  /// After a backward: each trainable replica's .grad() added to its window sum (when a
  /// zero_grad() replaced it), and shown as that sum.
  void keep_replica_grads();
  /// Ends the window's gradients: marks every gradient shard stale (its values stay; the
  /// next window's first gradient overwrites them, ZeroParam::grad_written) and drops the
  /// replicas' gradients with their window sums.
  void zero_window_gradients();
  /// The end of an optimizer step, applied or skipped (DESIGN step 6): buffers synced,
  /// GatheredParameters scopes told, the trace's step ended, the timeline's step closed.
  void close_step();
  void allocate_grad_shards(const std::vector<ZeroParam*>& with_grads);
  /// Errors unless each buffers.modules path names a module or buffer of the model.
  void check_buffer_policies() const;
  bool unscale_or_skip(std::vector<Tensor>& replica_grads);
  void skip_overflowed_step();
  /// The ranks can no longer match their collectives after a failure on some of them:
  /// with more than one rank, aborts the communicator naming `phase` and the error (not
  /// for an error every rank raised together, nor one that is already an abort).
  void abort_after(const char* phase, const std::exception& e);
  /// Runs `fn`; if it throws, discards the window (aborting the communicator first where
  /// abort_after says so) and rethrows.
  void discarding_on_error(const char* phase, const std::function<void()>& fn);
  /// step() past its checks at an accumulation boundary: reduce, clip, update. False
  /// when an fp16 overflow skipped the update.
  bool update();
  void end_timeline_step();
  void check_capturable() const;
  void check_trainable_unchanged() const;
  /// Errors on a gradient that reached a parameter outside backward().
  void check_no_stray_gradient() const;
  /// Errors on a parameter of `named` partitioned over another rank count (or as another
  /// rank) than this engine's communicator: its shards would gather wrongly.
  void check_rank_count(const NamedTensors& named) const;
  /// Errors on a trainable parameter the model gained after construction (checked when
  /// nn::registration_count() moved since the last check).
  void check_model_unchanged();
  /// After an applied step: notes (rank 0, once per parameter) each parameter of which a
  /// gathered copy released since the last step is still held by a tensor made from it.
  void note_stale_copies();
  uint64_t replica_versions() const;

  /// The model and the parameters this engine partitions, held exclusively while it
  /// lives (released last, also when the constructor throws). Thread ranks share one
  /// address space: a model built once and captured by every rank's function would
  /// otherwise be partitioned by N engines at once.
  std::set<std::string> stale_noted_;  // parameters note_stale_copies() has named

  class Claim {
   public:
    ~Claim();
    /// Takes `what` (named `name` in errors) for the engine of rank `rank`, or errors
    /// naming whoever holds it.
    void take(const void* what, const std::string& name, int rank);

   private:
    std::vector<const void*> held_;
  };

  std::shared_ptr<nn::Module> model_;
  comm::Communicator& comm_;
  Config config_;
  Claim claim_;
  std::vector<NamedParam> params_;
  std::vector<std::pair<std::string, Tensor>> replicas_;
  std::vector<bool> replica_trains_;  // replicas_[i] was trainable at construction
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<OptimizerOffload> offload_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<Timeline> timeline_;
  std::string timeline_path_;
  bool timeline_written_ = false;
  // After coordinator_ and reducer_, which its hooks call: destroyed before them.
  std::unique_ptr<Hooks> hooks_;
  LossScaler scaler_;
  int micro_ = 0;
  int backwards_ = 0;  // backward() calls since the last step()
  // Per replicas_ entry: its gradient summed over this window's backwards, which the
  // replica's .grad() shows. A zero_grad() between micro-steps (a PyTorch habit) cannot
  // drop the earlier micro-steps' part, as it cannot for the partitioned parameters,
  // whose gradients are in the shards (DeepSpeed's engine owns its gradients alike).
  std::vector<Tensor> replica_window_grads_;
  uint64_t registrations_ = 0;  // nn::registration_count() when last checked
  // The replicas' storage versions summed (replica_versions()) after the engine's own
  // writes: a sum that moved by the next step means a write from outside (a load on one
  // rank), and that step verifies the replicas before its update.
  uint64_t replica_versions_ = 0;
  // The averaged buffers written outside the model's forwards since the last sync: the
  // ranks must agree on which were (a load or an edit on some ranks only would otherwise be
  // mixed into every rank's value by the sync; a broadcast counts as a write on every rank).
  std::unique_ptr<BufferWrites> buffer_writes_;
  bool capture_counted_ = false;    // a captured step's own count not yet replayed
  Tensor last_grad_norm_;           // one f64 element on the parameters' device
  std::vector<Tensor> grad_flats_;  // per device, the fp32 buffer of every gradient shard
  std::vector<std::shared_ptr<nn::BatchNorm>> synced_batchnorms_;  // config_.sync_batchnorm's
  EngineStats stats_;
};

}  // namespace zt::zero
