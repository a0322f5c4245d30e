// The model-state bytes of one rank, read from the allocator's per-tag counters: what
// ZeRO-3 promises to divide by the number of ranks (parameter, gradient and optimizer
// shards) and what it holds only for a while (gathered parameters, activations,
// communication buffers).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/allocator.h"
#include "core/device.h"

namespace zt::zero {

/// Bytes of model state on this rank, from the allocator's tags (current and peak).
struct MemoryReport {
  int64_t param_shard = 0, grad_shard = 0, optim_state = 0;
  int64_t gathered_param = 0, gathered_param_peak = 0;
  int64_t activation = 0, activation_peak = 0;
  int64_t comm_buffer_peak = 0;
  /// Peak bytes of every tag (MemTag order) and of all tags together, since the start or
  /// the last reset_peak_memory(): what memory.limit must hold.
  std::array<int64_t, kNumMemTags> peaks{};
  int64_t total_peak = 0;
  /// offload_optimizer: the optimizer state lives on the host; its bytes there (fp32
  /// masters and moments), the host gradient buffers and, for bf16/f16 storage, the
  /// staging copies (the host's communication buffers), and the peak of everything the
  /// host's ledger holds (what the host's memory limit caps: the data too). All 0 when
  /// training on the cpu, where the state is optim_state already (as the planner counts it).
  bool optim_offloaded = false;
  int64_t optim_state_host = 0, grad_shard_host = 0, staging_host = 0, host_total_peak = 0;
  /// param + grad + optimizer shards.
  int64_t model_state() const { return param_shard + grad_shard + optim_state; }
  std::string json() const;
};

/// The report for device `d` from this thread's memory ledger; with `optim_offloaded` and
/// `d` off the CPU it also reads the optimizer state's, the gradient buffers' and the
/// staging copies' host bytes, and the host's total peak.
MemoryReport memory_report(Device d, bool optim_offloaded = false);

}  // namespace zt::zero
