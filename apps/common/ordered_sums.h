// Scores summed item by item in dataset order, so that an evaluation gives the same bits
// on any number of ranks: each rank's items, tagged with their dataset index, are
// gathered and added up in index order (rather than each rank's partial sums reduced,
// whose rounding follows how the items were spread). Also the evaluation pass's start and
// its items' indices, which both apps' evaluations share.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/loader.h"
#include "zero/comm/communicator.h"

namespace zt::app {

/// Starts an evaluation pass over `loader` from its first batch: as many batches as every
/// rank has (at most `batches` when > 0; each rank runs each forward, as ZeRO-3's gathers
/// need), which it returns. Error naming `what` where a rank has none.
int64_t begin_eval_pass(data::DataLoader& loader, int64_t batches, comm::Communicator& comm,
                        const char* what);
/// The dataset indices of batch `b`'s first `real` items (its own, not the padding).
std::vector<int64_t> item_indices(const data::Batch& b, int64_t real);

/// One item's N values and its index in the dataset.
template <size_t N>
struct IndexedValues {
  int64_t index = 0;
  std::array<double, N> values{};
};

/// Every rank's `mine` (all ranks call it) gathered and summed in dataset-index order:
/// the N values' sums, then the item count. An index given twice (an image read in a bad
/// one's place) keeps its items in rank order, which hold the same values. `label` (a
/// string literal) labels the collective and the errors.
template <size_t N>
std::array<double, N + 1> sum_in_index_order(const std::vector<IndexedValues<N>>& mine,
                                             comm::Communicator& comm, const char* label) {
  using Item = IndexedValues<N>;
  std::string bytes(mine.size() * sizeof(Item), '\0');
  if (!mine.empty()) std::memcpy(bytes.data(), mine.data(), bytes.size());
  std::vector<Item> all;
  for (const std::string& b : comm.all_gather_bytes(bytes, label)) {
    ZT_CHECK(b.size() % sizeof(Item) == 0, label, ": a rank sent ", b.size(),
             " bytes of item scores, not a whole number of ", sizeof(Item));
    const size_t n = all.size();
    all.resize(n + b.size() / sizeof(Item));
    if (!b.empty()) std::memcpy(all.data() + n, b.data(), b.size());
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Item& a, const Item& b) { return a.index < b.index; });
  std::array<double, N + 1> sums{};
  for (const Item& item : all) {
    for (size_t i = 0; i < N; ++i) sums[i] += item.values[i];
    sums[N] += 1;
  }
  return sums;
}

}  // namespace zt::app
