// `<app> plan`: predicted and measured per-rank bytes of a config's training.
#include "apps/common/plan.h"

#include <cstdio>
#include <sstream>

#include "apps/common/train_util.h"
#include "core/allocator.h"
#include "core/plural.h"

namespace zt::app {

std::string PlanResult::json() const {
  const std::string p = plan.json();  // {...}, extended with the estimate and the total
  std::ostringstream os;
  os << "{\"predicted\":" << p.substr(0, p.size() - 1)
     << ",\"activation_estimate\":" << activation_estimate << ",\"total\":" << predicted_total()
     << "},\"measured\":" << measured.json();
  os << ",\"updates\":" << updates << ",\"steps\":" << steps
     << ",\"complete\":" << (complete() ? "true" : "false") << "}";
  return os.str();
}

NoMemoryLimit::NoMemoryLimit() {
  const std::shared_ptr<MemoryLedger>& ledger = current_ledger();
  for (int slot = 0; slot < MemoryLedger::kLedgerSlots; ++slot) {
    const Device d = slot == 0 ? Device::cpu() : Device::cuda(slot - 1);
    if (const int64_t limit = ledger->limit(d); limit > 0) {
      lifted_.emplace_back(d, limit);
      ledger->set_limit(d, 0);
    }
  }
}

int64_t NoMemoryLimit::lifted(Device d) const {
  for (const auto& [device, limit] : lifted_)
    if (device == d) return limit;
  return 0;
}

NoMemoryLimit::~NoMemoryLimit() {
  for (const auto& [d, limit] : lifted_) current_ledger()->set_limit(d, limit);
}

namespace {

// One line of the table; a negative value is not known (left blank).
void row(const std::string& what, int64_t predicted, int64_t measured) {
  auto cell = [](int64_t v) { return v < 0 ? std::string() : format_byte_size(v); };
  std::printf("  %-36s %12s %12s\n", what.c_str(), cell(predicted).c_str(), cell(measured).c_str());
}

// "<what> 1 GiB per rank (...): fits, 10 MiB to spare", "...: does not fit by 3 MiB", or
// between the two, within PlanResult::margin: too tight.
void verdict(const char* what, int64_t limit, int64_t needed) {
  const int64_t margin = PlanResult::margin(needed);
  const std::string v =
      needed + margin <= limit ? "fits, " + format_byte_size(limit - needed) + " to spare"
      : needed <= limit
          ? "too tight: " + format_byte_size(limit - needed) + " to spare, under the " +
                format_byte_size(margin) +
                " a training run holds beside the measured step (logging, data in flight); "
                "give it more"
          : "does not fit by " + format_byte_size(needed - limit);
  std::printf("  %s %s per rank (memory.limit or ZT_MEMORY_LIMIT): %s\n", what,
              format_byte_size(limit).c_str(), v.c_str());
}

}  // namespace

PlanResult plan_training(zero::Engine& engine, nn::Module& model, const config::AppConfig& cfg,
                         const NoMemoryLimit& limits, const std::function<Tensor()>& loss,
                         comm::Communicator& comm, const std::string& app, int steps, bool quiet) {
  ZT_CHECK(steps >= 1, app, ": needs at least one measured step, got ", steps);
  const bool say = comm.rank() == 0 && !quiet;
  PlanResult r;
  const config::TrainConfig& tc = cfg.train;
  r.plan = zero::plan_memory(model, comm.size(), engine.config(), optimizer_states(tc));
  // A step: gradient_accumulation_steps micro-batches, the engine updating at the last.
  auto step = [&] {
    for (int m = 0; m < engine.config().gradient_accumulation_steps; ++m) {
      engine.backward(loss());
      engine.step();
    }
  };
  // The first step records the trace; its activation peak is the estimate.
  reset_peak_memory();
  step();
  r.activation_estimate = engine.memory_report().activation_peak;
  reset_peak_memory();
  // Until `steps` updates applied (an fp16 overflow skips one), within a bound.
  const int64_t start = engine.global_step();
  r.steps = steps;
  for (int s = 0; s < steps + kExtraPlanSteps && engine.global_step() - start < steps; ++s) step();
  r.updates = engine.global_step() - start;
  r.measured = engine.memory_report();
  r.limit = limits.lifted(engine.device());
  if (r.host_needed() > 0) r.host_limit = limits.lifted(Device::cpu());
  if (!say) return r;
  const zero::MemoryPlan& p = r.plan;
  const zero::MemoryReport& m = r.measured;
  std::printf("%s: bytes per rank at %s, %s parameters\n", app.c_str(),
              counted(p.world, "rank").c_str(), dtype_name(engine.config().precision.dtype()));
  std::printf("  %-36s %12s %12s\n", "", "predicted", "measured");
  row("parameter shards", p.param_shard, m.param_shard);
  row("gradient shards", p.grad_shard, m.grad_shard);
  row("optimizer state", p.optim_state, m.optim_state);
  row("= model states", p.model_state(), m.model_state());
  row("gathered parameters (peak)", p.gathered_peak, m.gathered_param_peak);
  std::printf(
      "  (a hard bound: stage3_max_live_parameters = %lld elements, plus the module\n"
      "   being fetched and the persistent parameters)\n",
      static_cast<long long>(engine.config().stage3_max_live_parameters));
  row("replicated parameters and buffers", p.replicated, -1);
  if (p.replica_grad > 0)  // allocated by the backward: an activation
    row("replicas' gradients (in activations)", p.replica_grad, -1);
  row("activations (peak; one traced step)", r.activation_estimate, m.activation_peak);
  row("communication buffers (peak)", -1, m.comm_buffer_peak);
  row("other: replicas, data, temps (peak)", -1, m.peaks[static_cast<int>(MemTag::kOther)]);
  row("total (peak)", r.predicted_total(), m.total_peak);
  if (r.host_needed() > 0) {
    std::printf("  on the host (offload_optimizer):\n");
    row("optimizer state", p.optim_state_host, m.optim_state_host);
    row("gradient buffers", p.grad_shard_host, m.grad_shard_host);
    row("staging copies (bf16/f16 shards)", p.staging_host, m.staging_host);
    row("total (peak; measured: all the host holds)", p.host(), m.host_total_peak);
  }
  if (!r.complete())
    std::printf(
        "  measured: only %lld of %d steps applied an update (fp16 overflows skipped the rest, "
        "%d steps more included): the measured model states and peaks are incomplete\n",
        static_cast<long long>(r.updates), steps, kExtraPlanSteps);
  if (r.limit > 0) verdict("memory limit", r.limit, r.needed());
  if (r.host_limit > 0) verdict("host memory limit", r.host_limit, r.host_needed());
  std::printf("%s\n", r.json().c_str());
  std::fflush(stdout);
  return r;
}

}  // namespace zt::app
