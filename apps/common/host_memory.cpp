// Host memory checked before a run allocates: the per-process sums and the error.
#include "apps/common/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/allocator.h"
#include "core/plural.h"

namespace zt::app {

std::string host_fit_error(const std::vector<HostNeed>& ranks, const std::string& what) {
  auto host_of = [](const HostNeed& n) {
    return std::string(n.host, strnlen(n.host, sizeof(n.host)));
  };
  for (size_t i = 0; i < ranks.size(); ++i) {
    const HostNeed& n = ranks[i];
    const std::string host = host_of(n);
    // The host's first rank speaks for it; each process's held bytes count once.
    bool first = true;
    int64_t to_come = 0, held = 0;
    int count = 0;
    std::vector<uint64_t> processes;
    for (size_t j = 0; j < ranks.size(); ++j) {
      if (host_of(ranks[j]) != host) continue;
      first = first && j >= i;
      to_come += ranks[j].to_come;
      ++count;
      if (std::find(processes.begin(), processes.end(), ranks[j].process) == processes.end()) {
        processes.push_back(ranks[j].process);
        held += ranks[j].held;
      }
    }
    if (!first || n.memory <= 0 || held + to_come <= n.memory) continue;
    const std::string who =
        processes.size() == 1
            ? ::zt::detail::cat("the process of rank ", i, " (", counted(count, "rank"), ") holds ")
            : ::zt::detail::cat("the ", processes.size(), " processes on host '", host, "' (",
                                counted(count, "rank"), ", the first rank ", i, ") hold ");
    return ::zt::detail::cat(
        what, " do not fit the host's memory: ", who, format_byte_size(held),
        " and would allocate ", format_byte_size(to_come), " more, past the machine's ",
        format_byte_size(n.memory),
        " (RAM and swap, or the container's limit). Train on more machines (ZeRO-3 divides "
        "model states by the rank count), with fewer ranks per machine, or a smaller model");
  }
  return "";
}

void check_host_fits(int64_t to_come, const std::string& what, comm::Communicator& comm) {
  HostNeed mine{0, to_come, process_cpu_bytes(), host_memory_bytes(), {}};
  gethostname(mine.host, sizeof(mine.host) - 1);
  mine.host[sizeof(mine.host) - 1] = '\0';
  mine.process = std::hash<std::string>{}(std::string(mine.host) + ':' + std::to_string(getpid()));
  const std::string error = host_fit_error(comm.all_gather_object(mine), what);
  ZT_CHECK(error.empty(), error);
}

void check_host_can_build(int64_t elements, bool replicated, Device device,
                          comm::Communicator& comm, const std::string& model) {
  if (!device.is_cpu()) return;
  const int64_t n = comm.size();
  const int64_t mine = replicated ? elements : (elements + n - 1) / n;
  check_host_fits(mine * 4,
                  ::zt::detail::cat(model, "'s f32 parameters (", elements, " elements, ",
                                    replicated ? "whole on every rank" : "partitioned", ")"),
                  comm);
}

int64_t host_bytes_to_come(const zero::MemoryPlan& p, Device device) {
  const int64_t planned =
      device.is_cpu() ? p.model_state() + p.gathered_peak + p.replicated : p.host();
  return std::max<int64_t>(0, planned - memory_stats(Device::cpu()).total_current);
}

}  // namespace zt::app
