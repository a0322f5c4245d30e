// DistributedSampler: which dataset indices each rank reads in each epoch.
//
// Every rank builds the same permutation of [0, N) from (seed, epoch) and takes every
// world-th element starting at its rank, so shards are disjoint and together cover the
// epoch. drop_last trims the permutation to a multiple of world (each rank gets
// floor(N / world)); otherwise it wraps around to pad it (ceil(N / world) each, a few
// indices then appear twice), as PyTorch's DistributedSampler does.
#pragma once

#include <cstdint>
#include <vector>

namespace zt::data {

class DistributedSampler {
 public:
  /// dataset_size N >= 1, rank in [0, world). With drop_last, N must be >= world.
  DistributedSampler(int64_t dataset_size, int64_t rank = 0, int64_t world = 1, uint64_t seed = 0,
                     bool shuffle = true, bool drop_last = true);

  /// Selects the epoch whose permutation indices() returns (reshuffles when shuffle).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  /// This rank's dataset indices for the current epoch, num_samples() of them.
  std::vector<int64_t> indices() const;
  /// The full (all ranks) order for the current epoch, total_size() long.
  std::vector<int64_t> global_order() const;

  /// Indices per rank per epoch.
  int64_t num_samples() const { return num_samples_; }
  /// num_samples() * world.
  int64_t total_size() const { return num_samples_ * world_; }
  int64_t dataset_size() const { return size_; }
  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }
  uint64_t seed() const { return seed_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }

 private:
  int64_t size_, rank_, world_;
  uint64_t seed_;
  bool shuffle_, drop_last_;
  int64_t epoch_ = 0;
  int64_t num_samples_ = 0;
};

/// A permutation of [0, n) determined by (seed, stream) alone (Fisher-Yates on Philox).
std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, uint64_t stream);

}  // namespace zt::data
