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

std::string restore_rng_state(const Tensor& state, const comm::Communicator& comm, int64_t step) {
  if (!state.defined()) return "";
  ZT_CHECK(
      state.dtype() == DType::i64 && state.dim() == 2 && state.size(0) >= 1 && state.size(1) == 2,
      "rng_state is ", state.str(), ", expected i64[ranks, 2] (each rank's seed and offset)");
  const Tensor s = state.contiguous();
  if (state.size(0) == comm.size()) {
    const int64_t* d = s.data<int64_t>() + 2 * comm.rank();
    default_generator().set_state(static_cast<uint64_t>(d[0]), static_cast<uint64_t>(d[1]));
    return "";
  }
  const auto saved = static_cast<uint64_t>(s.data<int64_t>()[0]);  // rank 0's seed
  manual_seed(saved + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(step) + 1u) +
              static_cast<uint64_t>(comm.rank()) + 1u);
  return "the dropout generators of " + std::to_string(state.size(0)) +
         " ranks do not split over " + std::to_string(comm.size()) +
         ": each rank draws a new stream, from the saved ones and step " + std::to_string(step);
}

}  // namespace zt::app
