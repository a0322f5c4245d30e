// Which averaged buffers this rank wrote outside the model's forwards since the last buffer
// sync. A forward writes the same buffers on every rank (BatchNorm's running statistics: the
// ranks run the same modules, which the step checks), so its writes are its own; a write
// outside one (a load, an edit) may be one rank's alone, and the sync's average would mix it
// into every rank's value, where no later check could find it. The engine compares these
// flags across the ranks at each step (zero/window_check.h).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/module.h"

namespace zt::zero {

class BufferWrites {
 public:
  /// Watches `buffers` (undefined entries are left out: buffers the step does not average),
  /// through hooks on `model`'s own call; removes them when it goes.
  BufferWrites(nn::Module& model, std::vector<Tensor> buffers);
  ~BufferWrites();
  BufferWrites(const BufferWrites&) = delete;
  BufferWrites& operator=(const BufferWrites&) = delete;

  /// Per buffer, 1 when it was written outside the model's forwards since synced().
  std::vector<uint8_t> outside_forwards();
  /// The buffers were synced (or broadcast): every flag goes back to 0.
  void synced();

 private:
  // Flags the buffers written since the last snapshot (outside a forward, when called).
  void note_writes();
  // The versions as they stand: what a forward wrote is its own.
  void snapshot();

  nn::Module& model_;
  std::vector<Tensor> buffers_;
  std::vector<uint64_t> versions_;  // per buffer, at the last snapshot (0: not watched)
  std::vector<uint8_t> outside_;
  std::vector<int> hooks_;
};

}  // namespace zt::zero
