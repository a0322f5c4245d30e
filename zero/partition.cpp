// Partition arithmetic.
#include "zero/partition.h"

#include <algorithm>

#include "core/error.h"

namespace zt::zero {

int64_t Partition::shard_valid(int rank) const {
  ZT_CHECK(rank >= 0 && rank < world, "rank ", rank, " out of range for world ", world);
  return std::clamp<int64_t>(numel - shard_offset(rank), 0, shard_numel);
}

Partition make_partition(int64_t numel, int world) {
  ZT_CHECK(world >= 1, "world size must be >= 1, got ", world);
  ZT_CHECK(numel >= 0, "numel must be >= 0, got ", numel);
  Partition p;
  p.numel = numel;
  p.world = world;
  p.shard_numel = (numel + world - 1) / world;
  return p;
}

}  // namespace zt::zero
