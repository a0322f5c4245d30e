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
  if (replica_grad > 0) os << ",\"replica_grad\":" << replica_grad;
  if (optim_state_host > 0)
    os << ",\"optim_state_host\":" << optim_state_host << ",\"grad_shard_host\":" << grad_shard_host
       << ",\"staging_host\":" << staging_host;
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
  // Per module owning partitioned parameters, its gathered members: a member's bytes as
  // its own padded all-gather (`padded`, the parameter itself when it gathers alone) and
  // as a copy out of a shared flat one (`exact`).
  struct Member {
    const TensorImpl* impl;
    int64_t padded, exact;
  };
  std::map<std::string, std::vector<Member>> groups;  // by path: ancestors first
  int64_t persistent = 0;
  // A tied parameter is stored once (its shards, gradient and optimizer state); each of
  // its modules lists it, and gathers it only when no module holds it already.
  std::unordered_set<const TensorImpl*> stored;
  for (auto& [path, m] : model.named_modules()) {
    std::vector<Member> members;
    std::unordered_set<const TensorImpl*> member;  // one tensor under two names: one member
    for (auto& [n, p] : m->local_parameters()) {
      if (!member.insert(p.impl()).second) continue;
      const bool first = stored.insert(p.impl()).second;
      if (is_replicated(p)) {
        const int64_t bytes = p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
        if (!first) continue;
        plan.replicated += bytes;
        if (p.requires_grad()) {  // updated in its own dtype, on its own device
          plan.optim_state += bytes * optimizer_states;
          plan.replica_grad += bytes;
        }
        continue;
      }
      const int64_t numel = is_partitioned(p) ? zero_param(p)->part.numel : p.numel();
      const DType dtype = engine_storage_dtype(p, low);  // what the engine will store
      const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
      const Partition part = make_partition(numel, world);
      if (first) plan.param_shard += part.shard_numel * esize;
      if (first && p.requires_grad()) {
        plan.grad_shard += grad_shard_slot(part.shard_numel) * 4;  // the engine's flat buffer
        if (config.offload_optimizer.enabled() && !p.device().is_cpu()) {
          plan.optim_state_host += part.shard_numel * 4 * (optimizer_states + 1);
          plan.grad_shard_host += part.shard_numel * 4;
          if (dtype != DType::f32) plan.staging_host += part.shard_numel * esize;
        } else {
          plan.optim_state += part.shard_numel * 4 * (optimizer_states + (dtype != DType::f32));
        }
      }
      if (numel <= config.stage3_param_persistence_threshold) {
        if (first) persistent += numel * esize;
        continue;
      }
      members.push_back({p.impl(), part.padded_numel() * esize, numel * esize});
    }
    if (!members.empty()) groups[path] = std::move(members);
  }
  for (auto& [path, b] : model.named_buffers())
    plan.replicated += b.numel() * static_cast<int64_t>(dtype_size(b.dtype()));

  // Gathering a group while `held` are gathered: the members it adds are kept (held_bytes:
  // one alone is its padded gather; several are copied out of one flat buffer) and, while
  // its flat buffer is unpacked, momentarily more (returned).
  auto gather = [](const std::vector<Member>& members, std::unordered_set<const TensorImpl*>& held,
                   int64_t& held_bytes) {
    int64_t padded = 0, exact = 0, n = 0;
    for (const Member& m : members)
      if (held.insert(m.impl).second) padded += m.padded, exact += m.exact, ++n;
    held_bytes += n == 1 ? padded : exact;
    return n == 1 ? padded : padded + exact;
  };
  // The chain: a module computes inside every ancestor's call, whose parameters stay
  // gathered meanwhile (ancestors come first in path order).
  int64_t chain = 0, whole = 0;
  std::unordered_set<const TensorImpl*> all;
  for (auto& [path, g] : groups) {
    std::unordered_set<const TensorImpl*> held;
    int64_t held_bytes = 0;
    for (auto& [other, o] : groups)
      if (other != path && (other.empty() || path.rfind(other + ".", 0) == 0))
        gather(o, held, held_bytes);
    const int64_t ancestors = held_bytes;
    chain = std::max(chain, ancestors + gather(g, held, held_bytes));
    gather(g, all, whole);
  }
  const int64_t esize = static_cast<int64_t>(dtype_size(low));
  whole = std::max(chain, whole);
  // An element bound past the whole model bounds nothing more: capped there before it is
  // multiplied into bytes (a bound of 2^62 elements would overflow).
  const int64_t live = std::min(config.stage3_max_live_parameters, whole / esize + 1);
  const int64_t window = std::min(config.stage3_prefetch_bucket_size, live) * esize;
  // Modules kept for reuse fill up to stage3_max_live_parameters, then the chain being
  // fetched comes on top.
  const int64_t kept =
      config.stage3_max_reuse_distance > 0 ? std::min(whole, live * esize + chain) : 0;
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
    for (int m = 0; m < engine.config().gradient_accumulation_steps; ++m) {
      engine.backward(loss());
      engine.step();
    }
  }
  return engine.memory_report();
}

}  // namespace zt::zero
