// Each rank's default random generator, which dropout draws from: its own stream from
// train.seed, and its state saved in a checkpoint and restored on resume.
#include "apps/common/rng_state.h"

#include "core/rng.h"

namespace zt::app {

void seed_dropout(const config::TrainConfig& train, const comm::Communicator& comm) {
  manual_seed(static_cast<uint64_t>(train.seed) * 1000003u + static_cast<uint64_t>(comm.rank()) +
              1u);
}

Tensor gather_rng_state(comm::Communicator& comm) {
  const Generator& g = default_generator();
  const auto seeds = comm.all_gather_object<uint64_t>(g.seed());
  const auto offsets = comm.all_gather_object<uint64_t>(g.offset());
  const auto n = static_cast<int64_t>(seeds.size());
  Tensor t = Tensor::empty({n, 2}, DType::i64);
  for (int64_t r = 0; r < n; ++r) {
    t.data<int64_t>()[2 * r] = static_cast<int64_t>(seeds[static_cast<size_t>(r)]);
    t.data<int64_t>()[2 * r + 1] = static_cast<int64_t>(offsets[static_cast<size_t>(r)]);
  }
  return t;
}

bool restore_rng_state(const Tensor& state, const comm::Communicator& comm) {
  if (!state.defined() || state.dtype() != DType::i64 || state.sizes() != Shape{comm.size(), 2})
    return false;
  const Tensor s = state.contiguous();
  const int64_t* d = s.data<int64_t>() + 2 * comm.rank();
  default_generator().set_state(static_cast<uint64_t>(d[0]), static_cast<uint64_t>(d[1]));
  return true;
}

}  // namespace zt::app
