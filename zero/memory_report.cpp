// MemoryReport from the allocator's counters.
#include "zero/memory_report.h"

#include <sstream>

namespace zt::zero {

std::string MemoryReport::json() const {
  std::ostringstream os;
  os << "{\"param_shard\":" << param_shard << ",\"grad_shard\":" << grad_shard
     << ",\"optim_state\":" << optim_state << ",\"model_state\":" << model_state()
     << ",\"gathered_param\":" << gathered_param
     << ",\"gathered_param_peak\":" << gathered_param_peak << ",\"activation\":" << activation
     << ",\"activation_peak\":" << activation_peak << ",\"comm_buffer_peak\":" << comm_buffer_peak
     << ",\"peak\":{";
  for (int t = 0; t < kNumMemTags; ++t)
    os << "\"" << mem_tag_name(static_cast<MemTag>(t)) << "\":" << peaks[t] << ",";
  os << "\"total\":" << total_peak << "}";
  if (optim_offloaded)
    os << ",\"optim_state_device\":\"cpu\",\"optim_state_host\":" << optim_state_host
       << ",\"grad_shard_host\":" << grad_shard_host << ",\"staging_host\":" << staging_host
       << ",\"host_total_peak\":" << host_total_peak;
  os << "}";
  return os.str();
}

MemoryReport memory_report(Device d, bool optim_offloaded) {
  MemoryCounters c = memory_stats(d);
  MemoryReport r;
  r.param_shard = c.cur(MemTag::kParamShard);
  r.grad_shard = c.cur(MemTag::kGradShard);
  r.optim_state = c.cur(MemTag::kOptimState);
  r.gathered_param = c.cur(MemTag::kGatheredParam);
  r.gathered_param_peak = c.pk(MemTag::kGatheredParam);
  r.activation = c.cur(MemTag::kActivation);
  r.activation_peak = c.pk(MemTag::kActivation);
  r.comm_buffer_peak = c.pk(MemTag::kCommBuffer);
  r.peaks = c.peak;
  r.total_peak = c.total_peak;
  if (optim_offloaded) {
    r.optim_offloaded = true;
    if (!d.is_cpu()) {  // on the CPU the state is optim_state already: counted once
      MemoryCounters host = memory_stats(Device::cpu());
      r.optim_state_host = host.cur(MemTag::kOptimState);
      r.grad_shard_host = host.cur(MemTag::kGradShard);
      r.staging_host = host.cur(MemTag::kCommBuffer);  // between steps: the staging copies
      r.host_total_peak = host.total_peak;
    }
  }
  return r;
}

}  // namespace zt::zero
