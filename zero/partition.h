// Partition math for ZeRO-3: how a parameter of `numel` elements is split over `world`
// ranks. Every rank holds a flat shard of shard_numel = ceil(numel / world) elements; the
// last shards are zero-padded, so the gathered buffer is world * shard_numel long and
// the parameter is its first numel elements. Pure arithmetic, no devices.
#pragma once

#include <cstdint>

namespace zt::zero {

struct Partition {
  int64_t numel = 0;        // elements of the full parameter
  int world = 1;            // ranks
  int64_t shard_numel = 0;  // elements per rank, padding included

  /// Total elements of the gathered (padded) buffer.
  int64_t padded_numel() const { return shard_numel * world; }
  /// Padding elements (all on the last ranks).
  int64_t padding() const { return padded_numel() - numel; }
  /// First element of the full parameter owned by `rank`.
  int64_t shard_offset(int rank) const { return shard_numel * rank; }
  /// Real (non-padding) elements in `rank`'s shard: 0 <= valid <= shard_numel.
  int64_t shard_valid(int rank) const;
};

/// The partition of `numel` elements over `world` ranks (world >= 1, numel >= 0).
Partition make_partition(int64_t numel, int world);

}  // namespace zt::zero
