// A memory planner: the per-rank bytes ZeRO-3 will hold for a model, world size and
// config, predicted from the model's parameters alone (nothing is gathered or run):
//   model states   each trainable parameter's shard, ceil(numel / N) elements:
//                  f32 + AdamW: 4 (param) + 4 (grad) + 8 (two moments) = 16 B/element;
//                  bf16/f16 with an fp32 master: 2 + 4 (master) + 4 + 8 = 18 B/element
//                  (DeepSpeed's 16 Psi / N, for the precision in use; the gradient's
//                  4 B per element of its slot in the flat buffer, rounded up to 16);
//   gathered peak  the module chain gathered at once (a module and every ancestor that
//                  owns parameters, a multi-parameter module twice while its one flat
//                  all-gather is unpacked), plus the prefetch window, never above
//                  stage3_max_live_parameters beyond the module being fetched, plus the
//                  persistent parameters (gathered all the time; one alone in its module's
//                  gather keeps its padding; the step re-gathers them module by module,
//                  each flat buffer beside those gathered before it); with
//                  stage3_max_reuse_distance > 0 modules stay gathered from forward to
//                  backward until stage3_max_live_parameters are, so the bound is that
//                  plus the chain being fetched; all of it never above the whole model
//                  in flight at once (every module's flat buffer, one module cut out);
//   replicated     replicated parameters and buffers, in full on every rank; a trainable
//                  replica's optimizer state is in full too (in optim_state, on the device
//                  even with offload_optimizer), and its full gradient is held from
//                  backward to step (replica_grad, allocated by the backward: activations);
//   offload        with offload_optimizer and parameters on a GPU, the optimizer state
//                  (always with an fp32 master: 4 + 8 B/element for AdamW) and an fp32
//                  gradient buffer move to host memory: optim_state_host, grad_shard_host,
//                  and for bf16/f16 storage a staging copy the shards are rounded into
//                  (2 B/element): staging_host.
// zt-bench plan prints it next to a short run's measured zero::MemoryReport.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "nn/module.h"
#include "zero/config.h"
#include "zero/engine.h"

namespace zt::zero {

/// Predicted bytes on one rank.
struct MemoryPlan {
  int world = 1;
  int64_t param_shard = 0, grad_shard = 0, optim_state = 0;
  int64_t gathered_peak = 0;
  int64_t replicated = 0;  // replicated parameters and buffers, full size
  /// Trainable replicas' full gradients, held from a window's first backward to its step;
  /// the backward allocates them, so they are charged to (and measured as) activations.
  int64_t replica_grad = 0;
  /// offload_optimizer off the CPU: host bytes (optim_state then holds only the replicas'
  /// state on the device): masters and moments, gradient buffers, bf16/f16 staging copies.
  int64_t optim_state_host = 0, grad_shard_host = 0, staging_host = 0;
  /// Everything the offloaded optimizer keeps on the host.
  int64_t host() const { return optim_state_host + grad_shard_host + staging_host; }
  /// param + grad + optimizer shards (MemoryReport::model_state()).
  int64_t model_state() const { return param_shard + grad_shard + optim_state; }
  std::string json() const;
};

/// Plans `model` (built plain or under zero::Init/Replicated on any world size) at
/// `world` ranks; `optimizer_states` fp32 values per trainable element (2 for Adam and
/// AdamW, 1 for SGD with momentum, 0 without).
MemoryPlan plan_memory(nn::Module& model, int world, const Config& config,
                       int optimizer_states = 2);

/// Measures what the plan predicts: runs `steps` (>= 2) training steps of `engine`, each
/// gradient_accumulation_steps micro-batches of backward(loss()) then step() (`loss` calls
/// the engine's model), and returns this rank's report with peaks from the steps after the
/// first (which records the trace).
MemoryReport measure_memory(Engine& engine, const std::function<Tensor()>& loss, int steps = 2);

}  // namespace zt::zero
