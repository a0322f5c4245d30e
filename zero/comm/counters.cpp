// The collectives' names and the textbook received volumes the counters add up.
#include "zero/comm/counters.h"

#include <sstream>

namespace zt::comm {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kScatter:
      return "scatter";
    case Collective::kBarrier:
      return "barrier";
    case Collective::kAllGatherBytes:
      return "all_gather_bytes";
  }
  return "?";
}

int64_t CommCounters::total_calls() const {
  int64_t t = 0;
  for (const auto& c : per_kind) t += c.calls;
  return t;
}

int64_t CommCounters::total_bytes() const {
  int64_t t = 0;
  for (const auto& c : per_kind) t += c.bytes;
  return t;
}

std::string CommCounters::json() const {
  std::ostringstream os;
  os << '{';
  for (int i = 0; i < kNumCollectives; ++i) {
    os << (i ? "," : "") << '"' << collective_name(static_cast<Collective>(i))
       << "\":{\"calls\":" << per_kind[i].calls << ",\"bytes\":" << per_kind[i].bytes << '}';
  }
  os << '}';
  return os.str();
}

int64_t received_bytes(Collective c, int64_t numel, size_t elem_size, int size, int rank,
                       int root) {
  const int64_t e = static_cast<int64_t>(elem_size), n = size;
  switch (c) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      return (n - 1) * numel * e;
    case Collective::kAllReduce:
      return 2 * (n - 1) * numel * e / n;
    case Collective::kBroadcast:
    case Collective::kScatter:
      return rank == root ? 0 : numel * e;
    case Collective::kBarrier:
    case Collective::kAllGatherBytes:
      return 0;
  }
  return 0;
}

}  // namespace zt::comm
