// zero::Engine: ZeRO-3 training of one model on one communicator. It takes a model
// (built under zero::Init, or plain — then it is partitioned now), installs hooks on
// every module that owns partitioned parameters, and runs the life of a parameter
// (DESIGN.md): gather before forward (prefetching along the recorded trace), release
// after, re-gather before backward, release after, bucketed reduce-scatter of final
// gradients into fp32 shards, and the optimizer step on fp32 master shards. Replicated
// modules get no hooks; buffers are replicated and kept identical on every rank.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/module.h"
#include "optim/optim.h"
#include "zero/comm/communicator.h"
#include "zero/config.h"
#include "zero/param.h"
#include "zero/reducer.h"
#include "zero/trace.h"

namespace zt::zero {

/// Bytes of model state on this rank, from the allocator's tags (current and peak).
struct MemoryReport {
  int64_t param_shard = 0, grad_shard = 0, optim_state = 0;
  int64_t gathered_param = 0, gathered_param_peak = 0;
  int64_t activation = 0, activation_peak = 0;
  int64_t comm_buffer_peak = 0;
  /// param + grad + optimizer shards.
  int64_t model_state() const { return param_shard + grad_shard + optim_state; }
  std::string json() const;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t micro_steps = 0;
  int64_t gathers_issued = 0;     // all-gathers started (fetch + prefetch)
  int64_t prefetches_issued = 0;  // of which ahead of need
  int64_t releases = 0;
  int64_t trace_invalidations = 0;
  int64_t buckets_reduced = 0;
  int64_t overflow_skips = 0;
};

class Engine {
 public:
  Engine(std::shared_ptr<nn::Module> model, comm::Communicator& comm, Config config,
         OptimizerConfig optimizer);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Calls the model (its hooks do the gathering). Same as calling the model directly.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs);
  Tensor operator()(const Tensor& x) { return forward({x})[0]; }
  /// loss.backward() scaled by 1 / gradient_accumulation_steps.
  void backward(const Tensor& loss);
  /// Flushes queued gradient buckets and waits for every reduce-scatter; afterwards each
  /// rank's gradient shards hold its slice of the averaged gradients (step() does this).
  void reduce_gradients();
  /// Ends a micro-step; at each gradient_accumulation_steps boundary reduces, clips,
  /// updates and returns true.
  bool step();

  /// Hashes every buffer and replicated parameter on every rank; throws naming the first
  /// tensor that differs and which ranks hold which value.
  void verify_replicas();
  /// Applies the buffer policy now (broadcast / average / none per module path).
  void sync_buffers();

  void set_lr(double lr);
  double lr() const;
  /// The current fp16 loss scale (1 without fp16).
  double loss_scale() const { return loss_scale_; }
  /// Global gradient norm before clipping at the last step.
  double last_grad_norm() const { return last_grad_norm_; }
  MemoryReport memory_report() const;
  const EngineStats& stats() const { return stats_; }
  const Trace& trace() const { return trace_; }
  /// When on, records "fetch:<module>", "gather:<module>", "forward_end:<module>", ...
  void set_event_log(bool on) { log_events_ = on; }
  const std::vector<std::string>& events() const { return events_; }

  nn::Module& module() { return *model_; }
  std::shared_ptr<nn::Module> module_ptr() { return model_; }
  comm::Communicator& comm() { return comm_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  const Config& config() const { return config_; }
  int64_t global_step() const { return stats_.steps; }
  void set_global_step(int64_t s) { stats_.steps = s; }

  /// Partitioned parameters in registration order: name, tensor, fp32 master shard and
  /// gradient shard (for checkpoints).
  struct ManagedParam {
    std::string name;
    Tensor param;
    Tensor master;      // fp32 [shard_numel] (the shard itself for f32 parameters)
    Tensor grad_shard;  // fp32 [shard_numel]
  };
  const std::vector<ManagedParam>& partitioned() const { return params_; }
  /// Replicated parameters (name, tensor).
  const std::vector<std::pair<std::string, Tensor>>& replicated() const { return replicas_; }
  /// After master shards were overwritten (checkpoint load): refresh low-precision shards
  /// and gathered persistent copies.
  void refresh_from_master();

 private:
  struct Hooked {
    std::string path;
    nn::Module* module;
    std::vector<Tensor> params;  // its own partitioned parameters
    int64_t elems = 0;
    int pre_id = -1, post_id = -1;
  };

  void install_hooks();
  void fetch(int id, bool backward_phase);
  void release(int id);
  void prefetch_after(int id);
  void release_all();
  void issue(const Tensor& p, bool prefetch);
  void on_grad_ready(size_t index);
  void finish_trace_recording();
  void log(const std::string& e);
  void update_loss_scale(bool overflow);
  void skip_overflowed_step();

  std::shared_ptr<nn::Module> model_;
  comm::Communicator& comm_;
  Config config_;
  std::vector<ManagedParam> params_;
  std::unordered_map<TensorImpl*, size_t> param_index_;
  std::vector<std::pair<std::string, Tensor>> replicas_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<Hooked> hooked_;
  std::vector<std::pair<size_t, size_t>> grad_hook_slot_;  // (param, index of our hook)
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<GradReducer> reducer_;
  Trace trace_;
  int64_t live_elems_ = 0;
  int micro_ = 0;
  bool end_of_backward_queued_ = false;
  double last_grad_norm_ = 0.0;
  double loss_scale_ = 1.0;  // fp16 only
  int good_steps_ = 0;
  int hysteresis_left_ = 0;
  EngineStats stats_;
  bool log_events_ = false;
  std::vector<std::string> events_;
};

/// Builds the optimizer an engine uses (also usable for single-process baselines).
std::unique_ptr<optim::Optimizer> make_optimizer(
    const OptimizerConfig& cfg, std::vector<std::pair<std::string, Tensor>> params);

}  // namespace zt::zero
