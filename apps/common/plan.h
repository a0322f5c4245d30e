// `<app> plan`: what a config's training will hold per rank, predicted and then measured,
// before a long run is started. The prediction is zero::plan_memory's (model-state shards
// by the 16 Psi / N formula for the precision in use, the gathered peak, replicated
// parameters and buffers) plus an activation estimate: the activation peak of one traced
// training step at the config's batch. Then `steps` more steps run and rank 0's allocator
// peaks are printed beside each line, with the per-rank limit (memory.limit) if one is set.
// A step is gradient_accumulation_steps micro-batches, and the measured steps go on (a
// bounded number more) until `steps` updates were applied: an fp16 step skipped for an
// overflow applies none. Communication buffers and other memory (the dataset,
// temporaries) are measured only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "configs/app_config.h"
#include "zero/memory_plan.h"

namespace zt::app {

struct PlanResult {
  zero::MemoryPlan plan;
  int64_t activation_estimate = 0;  ///< the traced first step's activation peak
  zero::MemoryReport measured;      ///< peaks over the steps after the first
  /// Updates the measured steps were to apply, and applied: fewer when fp16 skipped
  /// more than the plan's extra steps allow (then the measured model states and peaks
  /// may lack what an update allocates: complete() is false).
  int64_t steps = 0, updates = 0;
  bool complete() const { return updates >= steps; }
  /// The limit a training run would meet on the engine's device (memory.limit or
  /// $ZT_MEMORY_LIMIT, as the plan found it); 0: none.
  int64_t limit = 0;
  /// Predicted peak: model states + gathered peak + replicated + activation estimate.
  int64_t predicted_total() const {
    return plan.model_state() + plan.gathered_peak + plan.replicated + activation_estimate;
  }
  /// The larger of the predicted and the measured peak: what the limit must hold.
  int64_t needed() const { return std::max(predicted_total(), measured.total_peak); }
  /// On a GPU with offload_optimizer, the host limit the run would meet (memory.limit caps
  /// each device, the host included); 0: none, or nothing offloaded.
  int64_t host_limit = 0;
  /// What the host must hold with an offloaded optimizer (0 without): the larger of the
  /// predicted state, gradient buffers and staging copies, and the measured peak of all
  /// the host's ledger held (the limit caps that: the data and temporaries too).
  int64_t host_needed() const {
    if (plan.host() == 0 && measured.optim_state_host == 0) return 0;
    return std::max(plan.host(), measured.host_total_peak);
  }
  /// What a training run holds beside the step the plan measures (its logging and metrics
  /// state, batches in flight, an evaluation's): 1% of `needed`, at least 256 KiB.
  static int64_t margin(int64_t needed) { return std::max<int64_t>(needed / 100, 256 << 10); }
  /// Whether needed() and its margin are within `limit`, and host_needed() and its within
  /// `host_limit` (each true without its limit).
  bool fits() const {
    return (limit <= 0 || needed() + margin(needed()) <= limit) &&
           (host_limit <= 0 || host_needed() + margin(host_needed()) <= host_limit);
  }
  /// {"predicted": {...}, "measured": {...}} on one line.
  std::string json() const;
};

/// Lifts this thread's (rank's) memory limits while in scope: a plan measures what a run
/// needs and compares it with memory.limit afterwards instead of stopping at the limit.
class NoMemoryLimit {
 public:
  NoMemoryLimit();
  ~NoMemoryLimit();
  NoMemoryLimit(const NoMemoryLimit&) = delete;
  NoMemoryLimit& operator=(const NoMemoryLimit&) = delete;
  /// The limit lifted on `d` (whatever set it: memory.limit, $ZT_MEMORY_LIMIT); 0: none.
  int64_t lifted(Device d) const;

 private:
  std::vector<std::pair<Device, int64_t>> lifted_;
};

/// The most steps a plan runs beyond those it measures when updates are skipped (fp16's
/// dynamic loss scale, at DeepSpeed's defaults, falls from 2^16 to its minimum of 1 in 17
/// overflows).
inline constexpr int kExtraPlanSteps = 32;

/// Runs the plan for `engine` (over `model`, built for cfg): `loss` returns one training
/// step's loss through the engine. Every rank runs it and gets its own numbers; rank 0
/// prints its table, and whether it fits the limit `limits` lifted, unless `quiet`. `app`
/// names the command in the output ("vqtok plan"). At most kExtraPlanSteps steps more than
/// `steps` run when updates are skipped.
PlanResult plan_training(zero::Engine& engine, nn::Module& model, const config::AppConfig& cfg,
                         const NoMemoryLimit& limits, const std::function<Tensor()>& loss,
                         comm::Communicator& comm, const std::string& app, int steps = 2,
                         bool quiet = false);

}  // namespace zt::app
