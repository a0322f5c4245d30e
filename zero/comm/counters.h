// What a communicator counts: the kinds of collective, and per kind the calls and the
// bytes a rank receives under the bandwidth-optimal algorithm (Communicator::counters()).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace zt::comm {

/// The kinds of collective; indexes CommCounters.
enum class Collective : uint8_t {
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kBroadcast,
  kScatter,
  kBarrier,
  kAllGatherBytes,
};
constexpr int kNumCollectives = 7;

/// "all_gather", "reduce_scatter", ...
const char* collective_name(Collective c);

/// Calls and bytes of one collective kind.
struct CollectiveCounters {
  int64_t calls = 0;
  int64_t bytes = 0;
};

/// Per-kind counters of one rank. "bytes" is the payload this rank *receives* under the
/// bandwidth-optimal algorithm (the textbook volume), whatever the backend really moves:
///   all_gather      (N-1)*s        (s = in.numel())
///   reduce_scatter  (N-1)*s        (s = out.numel())
///   all_reduce      2*(N-1)*n/N    (ring: reduce-scatter + all-gather; integer division)
///   broadcast       n on non-roots, 0 on the root
///   scatter         s on non-roots, 0 on the root (s = out.numel())
///   barrier         0
///   all_gather_bytes  the sum of the other ranks' payload sizes
/// times the element size. With N = 1 every volume is 0.
struct CommCounters {
  std::array<CollectiveCounters, kNumCollectives> per_kind{};
  const CollectiveCounters& operator[](Collective c) const { return per_kind[static_cast<int>(c)]; }
  int64_t total_calls() const;
  int64_t total_bytes() const;
  /// {"all_gather":{"calls":3,"bytes":96},...} on one line.
  std::string json() const;
};

/// The textbook received volume in bytes (see CommCounters) for one call.
int64_t received_bytes(Collective c, int64_t numel, size_t elem_size, int size, int rank, int root);

}  // namespace zt::comm
