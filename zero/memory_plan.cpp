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
    DType dtype;  // one all-gather per storage dtype and device among a module's members
    Device device;
  };
  std::map<std::string, std::vector<Member>> groups;  // by path: ancestors first
  // Each module's persistent members, in the order the engine re-gathers them after a step.
  std::vector<std::vector<Member>> persistent_groups;
  // A tied parameter is stored once (its shards, gradient and optimizer state); each of
  // its modules lists it, and gathers it only when no module holds it already.
  std::unordered_set<const TensorImpl*> stored;
  for (auto& [path, m] : model.named_modules()) {
    std::vector<Member> members, persistent;
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
      const Member member{p.impl(), part.padded_numel() * esize, numel * esize, dtype, p.device()};
      (numel <= config.stage3_param_persistence_threshold ? persistent : members).push_back(member);
    }
    if (!members.empty()) groups[path] = std::move(members);
    if (!persistent.empty()) persistent_groups.push_back(std::move(persistent));
  }
  for (auto& [path, b] : model.named_buffers())
    plan.replicated += b.numel() * static_cast<int64_t>(dtype_size(b.dtype()));

  // Gathering a group while `held` are gathered, what its new members cost, per all-gather
  // (one per storage dtype and device among them): one member alone is its padded buffer,
  // used in place; several are copied out of one flat buffer of their padded bytes, which is
  // held beside the copies while they are cut out.
  struct Gathered {
    int64_t flat = 0;    // the all-gather buffers
    int64_t copies = 0;  // cut out of those with several members
    int64_t kept = 0;    // held once gathered
  };
  auto gather = [](const std::vector<Member>& members,
                   std::unordered_set<const TensorImpl*>& held) {
    std::vector<Member> fresh;
    for (const Member& m : members)
      if (held.insert(m.impl).second) fresh.push_back(m);
    Gathered g;
    for (size_t i = 0; i < fresh.size(); ++i) {
      int64_t padded = 0, exact = 0, n = 0;
      bool first = true;  // of its all-gather
      for (size_t j = 0; j < fresh.size(); ++j) {
        if (fresh[j].dtype != fresh[i].dtype || fresh[j].device != fresh[i].device) continue;
        first = first && j >= i;
        padded += fresh[j].padded, exact += fresh[j].exact, ++n;
      }
      if (!first) continue;
      g.flat += padded;
      if (n > 1) g.copies += exact;
      g.kept += n > 1 ? exact : padded;
    }
    return g;
  };
  // Persistent parameters: re-gathered after every step, module by module, while nothing
  // else is gathered; each module's flat buffer comes on top of those gathered before it.
  int64_t persistent = 0, persistent_peak = 0;
  {
    std::unordered_set<const TensorImpl*> held;
    for (const std::vector<Member>& members : persistent_groups) {
      const Gathered g = gather(members, held);
      persistent_peak = std::max(persistent_peak, persistent + g.flat + g.copies);
      persistent += g.kept;
    }
  }
  // The chain: a module computes inside every ancestor's call, whose parameters stay
  // gathered meanwhile (ancestors come first in path order).
  int64_t chain = 0;
  for (auto& [path, g] : groups) {
    std::unordered_set<const TensorImpl*> held;
    int64_t ancestors = 0;
    for (auto& [other, o] : groups)
      if (other != path && (other.empty() || path.rfind(other + ".", 0) == 0))
        ancestors += gather(o, held).kept;
    const Gathered own = gather(g, held);
    chain = std::max(chain, ancestors + own.flat + own.copies);
  }
  // The whole model at once: every module's all-gather in flight (a prefetch window over
  // the model), one of them being cut out. Modules kept gathered hold less (their copies,
  // with one module's flat buffer beside them), so this bounds them too. A tied tensor is
  // in one all-gather at a time, but which module's depends on the order (the backward
  // reverses it): any module may cut all its members out.
  int64_t flats = 0, largest_copies = 0;
  {
    std::unordered_set<const TensorImpl*> all;
    for (auto& [path, members] : groups) {
      flats += gather(members, all).flat;
      std::unordered_set<const TensorImpl*> none;
      largest_copies = std::max(largest_copies, gather(members, none).copies);
    }
  }
  const int64_t esize = static_cast<int64_t>(dtype_size(low));
  const int64_t whole = std::max(chain, flats + largest_copies);
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
      world == 1
          ? 0
          : std::max(persistent_peak, persistent + std::max(std::min(chain + window, whole), kept));
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
