// DistributedSampler. The permutation uses the counter-based Philox stream keyed by a
// mix of (seed, epoch), so it is identical on every rank without any communication.
#include "data/sampler.h"

#include <numeric>

#include "core/error.h"
#include "core/plural.h"
#include "core/rng.h"

namespace zt::data {

namespace {
// splitmix64 finalizer: decorrelates nearby (seed, stream) pairs.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

std::vector<int64_t> random_permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  Generator g(mix(seed ^ mix(stream)));
  for (int64_t i = n - 1; i > 0; --i) {
    // A 64-bit draw reduced modulo i + 1: the bias (< 2^-32 for realistic n) is harmless.
    const uint64_t r = (static_cast<uint64_t>(g.word(2 * i)) << 32) | g.word(2 * i + 1);
    std::swap(p[i], p[r % static_cast<uint64_t>(i + 1)]);
  }
  return p;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t rank, int64_t world,
                                       uint64_t seed, bool shuffle, bool drop_last)
    : size_(dataset_size),
      rank_(rank),
      world_(world),
      seed_(seed),
      shuffle_(shuffle),
      drop_last_(drop_last) {
  ZT_CHECK(world >= 1, "DistributedSampler: world size must be >= 1, got ", world);
  ZT_CHECK(rank >= 0 && rank < world, "DistributedSampler: rank ", rank,
           " is outside [0, world=", world, ")");
  ZT_CHECK(dataset_size >= 1, "DistributedSampler: the dataset is empty");
  if (drop_last) {
    ZT_CHECK(dataset_size >= world, "DistributedSampler: a dataset of ",
             counted(dataset_size, "sample"), " cannot give each of ", counted(world, "rank"),
             " a sample with drop_last; use more samples or drop_last = false");
    num_samples_ = dataset_size / world;
  } else {
    num_samples_ = (dataset_size + world - 1) / world;
  }
}

std::vector<int64_t> DistributedSampler::global_order() const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = random_permutation(size_, seed_, static_cast<uint64_t>(epoch_));
  } else {
    order.resize(static_cast<size_t>(size_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const int64_t total = total_size();
  if (total <= size_) {
    order.resize(static_cast<size_t>(total));
  } else {
    for (int64_t i = size_; i < total; ++i) order.push_back(order[(i - size_) % size_]);
  }
  return order;
}

std::vector<int64_t> DistributedSampler::indices() const {
  const std::vector<int64_t> order = global_order();
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total_size(); i += world_) mine.push_back(order[i]);
  return mine;
}

}  // namespace zt::data
