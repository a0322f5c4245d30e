// The memory planner's arithmetic (see memory_plan.h for the model it implements).
#include "zero/memory_plan.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_set>

#include "zero/param.h"
#include "zero/partition.h"

namespace zt::zero {

std::string MemoryPlan::json() const {
  std::ostringstream os;
  os << "{\"world\":" << world << ",\"param_shard\":" << param_shard
     << ",\"grad_shard\":" << grad_shard << ",\"optim_state\":" << optim_state
     << ",\"model_state\":" << model_state() << ",\"gathered_peak\":" << gathered_peak
     << ",\"replicated\":" << replicated;
  if (optim_state_host > 0)
    os << ",\"optim_state_host\":" << optim_state_host
       << ",\"grad_shard_host\":" << grad_shard_host;
  os << "}";
  return os.str();
}

MemoryPlan plan_memory(nn::Module& model, int world, const Config& config, int optimizer_states) {
  ZT_CHECK(world >= 1, "plan_memory: world size must be >= 1, got ", world);
  ZT_CHECK(optimizer_states >= 0, "plan_memory: optimizer_states must be >= 0, got ",
           optimizer_states);
  MemoryPlan plan;
  plan.world = world;
  const DType low = config.precision.dtype();
  // Per module owning partitioned parameters: bytes held while gathered, and bytes at the
  // moment its flat all-gather is unpacked (flat buffer + the members' copies).
  struct Group {
    int64_t held = 0, transient = 0;
  };
  std::map<std::string, Group> groups;
  int64_t persistent = 0;
  // A tied parameter is stored once (its shards, gradient and optimizer state), but each
  // of its modules gathers it.
  std::unordered_set<const TensorImpl*> stored;
  int64_t tied_again = 0;
  for (auto& [path, m] : model.named_modules()) {
    int64_t flat = 0, copies = 0, members = 0, tied_flat = 0, tied_copies = 0;
    std::unordered_set<const TensorImpl*> member;  // one tensor under two names: one member
    for (auto& [n, p] : m->local_parameters()) {
      if (!member.insert(p.impl()).second) continue;
      const bool first = stored.insert(p.impl()).second;
      if (is_replicated(p)) {
        if (first) plan.replicated += p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
        continue;
      }
      const int64_t numel = is_partitioned(p) ? zero_param(p)->part.numel : p.numel();
      const DType dtype = is_partitioned(p)         ? zero_param(p)->dtype
                          : p.dtype() == DType::f32 ? low
                                                    : p.dtype();
      const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
      const Partition part = make_partition(numel, world);
      if (first) plan.param_shard += part.shard_numel * esize;
      if (first && p.requires_grad()) {
        plan.grad_shard += grad_shard_slot(part.shard_numel) * 4;  // the engine's flat buffer
        if (config.offload_optimizer.enabled() && !p.device().is_cpu()) {
          plan.optim_state_host += part.shard_numel * 4 * (optimizer_states + 1);
          plan.grad_shard_host += part.shard_numel * 4;
        } else {
          plan.optim_state += part.shard_numel * 4 * (optimizer_states + (dtype != DType::f32));
        }
      }
      if (numel <= config.stage3_param_persistence_threshold) {
        if (first) persistent += numel * esize;
        continue;
      }
      flat += part.padded_numel() * esize;
      copies += numel * esize;
      if (!first) {  // another module's too: gathered once when all modules are
        tied_flat += part.padded_numel() * esize;
        tied_copies += numel * esize;
      }
      ++members;
    }
    if (members == 0) continue;
    tied_again += members == 1 ? tied_flat : tied_copies;
    groups[path] = members == 1 ? Group{flat, flat} : Group{copies, flat + copies};
  }
  for (auto& [path, b] : model.named_buffers())
    plan.replicated += b.numel() * static_cast<int64_t>(dtype_size(b.dtype()));

  // The chain: a module computes inside every ancestor's call, whose parameters stay
  // gathered meanwhile.
  int64_t chain = 0, total = 0;
  for (auto& [path, g] : groups) {
    int64_t held = 0;
    for (auto& [other, o] : groups)
      if (other != path && (other.empty() || path.rfind(other + ".", 0) == 0)) held += o.held;
    chain = std::max(chain, held + g.transient);
    total += g.held;
  }
  const int64_t esize = static_cast<int64_t>(dtype_size(low));
  const int64_t window =
      std::min(config.stage3_prefetch_bucket_size, config.stage3_max_live_parameters) * esize;
  const int64_t whole = std::max(chain, total - tied_again);
  // Modules kept for reuse fill up to stage3_max_live_parameters, then the chain being
  // fetched comes on top.
  const int64_t kept = config.stage3_max_reuse_distance > 0
                           ? std::min(whole, config.stage3_max_live_parameters * esize + chain)
                           : 0;
  // One rank gathers nothing: a parameter's shard is the whole parameter, used in place.
  plan.gathered_peak =
      world == 1 ? 0 : persistent + std::max(std::min(chain + window, whole), kept);
  return plan;
}

MemoryReport measure_memory(Engine& engine, const std::function<Tensor()>& loss, int steps) {
  ZT_CHECK(steps >= 2, "measure_memory: needs >= 2 steps (the first records the trace), got ",
           steps);
  for (int s = 0; s < steps; ++s) {
    if (s == 1) reset_peak_memory();
    engine.backward(loss());
    engine.step();
  }
  return engine.memory_report();
}

}  // namespace zt::zero
