// The evaluation pass's start and its items' indices (see ordered_sums.h).
#include "apps/common/ordered_sums.h"

namespace zt::app {

int64_t begin_eval_pass(data::DataLoader& loader, int64_t batches, comm::Communicator& comm,
                        const char* what) {
  int64_t n = loader.batches_per_epoch();
  if (batches > 0) n = std::min(n, batches);
  const auto counts = comm.all_gather_object<int64_t>(n);
  n = *std::min_element(counts.begin(), counts.end());  // every rank runs as many
  ZT_CHECK(n > 0, what,
           ": a rank has no batch of data; lower the batch size or raise data.eval_samples");
  loader.restore({0, 0}, n);
  return n;
}

std::vector<int64_t> item_indices(const data::Batch& b, int64_t real) {
  const std::vector<double> v = b.indices.narrow(0, 0, real).to(DType::f64).to_vector();
  return std::vector<int64_t>(v.begin(), v.end());
}

}  // namespace zt::app
