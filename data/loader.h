// DataLoader: stacks samples into batches, preparing the next ones on a background
// thread. Legend: B batch, T frames, H/W height/width.
//
// The batch sequence is a pure function of (dataset, sampler seed, batch size): epoch
// e, batch p holds sampler indices [p * B, (p + 1) * B) of epoch e. Threads only decide
// *when* a batch is ready, never *what* is in it. next() runs from the sampler's epoch
// through the epochs without end; state()/restore() capture and reset the position so a
// checkpoint can resume the exact data stream. The background thread starts at the first
// next() or restore(), so a loader restored right after it is made (a resumed run, an
// evaluation) decodes nothing it then throws away.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/allocator.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "data/sampler.h"

namespace zt::data {

/// Seconds a stopping loader without a timeout waits for the samples being read before it
/// leaves their thread (PyTorch's DataLoader gives its workers as long at shutdown).
inline constexpr double kStopWait = 5.0;

/// How batches are made.
struct LoaderOptions {
  int64_t batch_size = 1;  ///< per rank
  int64_t prefetch = 2;    ///< batches prepared ahead; 0: made synchronously in next()
  int64_t workers = 1;     ///< threads that read the samples of one batch at once
  bool drop_last = true;   ///< drop an epoch's incomplete last batch
  /// Seconds next() waits for a batch before it throws (a dataset whose get() never
  /// returns); 0: no limit. At most kMaxTimeout (data_config.h). Needs prefetch >= 1: with
  /// prefetch 0 the calling thread reads.
  double timeout = 0;
};

/// One batch.
struct Batch {
  Tensor clips;    ///< (B, T, 3, H, W) f32
  Tensor labels;   ///< (B) i64
  Tensor indices;  ///< (B) i64 indices into the loader's dataset, as the sampler dealt them
                   ///< (a Subset's own, not its base's: Sample::index is not read)
  int64_t epoch = 0;
  int64_t position = 0;  ///< batch number within the epoch
};

/// Where the stream stands: the next batch next() returns.
struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;  ///< batch number within the epoch
  /// The layout `position` counts batches of: the per-rank batch size and the world of the
  /// loader that gave the state (state(), state_at_sample()). 0: not known (a state made of
  /// an epoch and a position alone), which restore() takes to be its own.
  int64_t batch_size = 0;
  int64_t world = 0;
  /// The size of the data set whose shuffle `position` is a place in (the sampler's
  /// dataset_size()); 0: not known, taken to be the restoring loader's own.
  int64_t dataset_size = 0;
  /// The same place in the stream: the same epoch and position, and the same layout and
  /// data set size where both states know them.
  bool operator==(const LoaderState& o) const {
    auto same = [](int64_t a, int64_t b) { return a == 0 || b == 0 || a == b; };
    return epoch == o.epoch && position == o.position && same(batch_size, o.batch_size) &&
           same(world, o.world) && same(dataset_size, o.dataset_size);
  }
};

/// Its methods are called from one thread at a time; the loader's own threads read samples.
class DataLoader {
 public:
  /// A loader whose stream starts at batch 0 of the sampler's epoch (set_epoch; 0 unless
  /// set) and then runs on through the following epochs.
  DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
             LoaderOptions options);
  /// Stops the loader's threads: the samples being read are finished, no other is started.
  /// It waits for them the timeout at most, kStopWait without one (not at all for the samples
  /// of a batch next() has already reported not ready in time); a thread still in a dataset's
  /// get() after that is left to end on its own, holding what it reads (the dataset included),
  /// so nothing it uses is freed under it, and stderr names its samples (a process that exits
  /// meanwhile ends it there). restore() stops them the same way.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// The next batch (moving on to the next epoch after the last one). A sample that
  /// failed to load is raised here, in stream order, as a zt::Error naming the dataset, the
  /// sample and the batch, with the dataset's own exception nested in it
  /// (std::rethrow_if_nested); the next call returns the batch after it. With a timeout, a
  /// batch not ready within it is a zt::Error naming the dataset, the batch, the samples
  /// whose get() has not returned and the timeout; the next call waits for it again.
  Batch next();
  /// Batches per epoch on this rank.
  int64_t batches_per_epoch() const;
  /// Position of the next batch next() will return.
  LoaderState state() const;
  /// Continues from `state`, discarding the prepared batches, unless it is already there.
  /// A state of another layout (batch size or world) is refused: its position counts other
  /// batches; state_at_sample converts it. So is a state taken over a data set of another
  /// size: its epoch's shuffle is another order of other samples. With `batches` > 0 only that many
  /// more are prepared and returned (an evaluation that reads a fixed number decodes none past
  /// them); next() after them throws. A later restore sets the end anew.
  void restore(const LoaderState& state, int64_t batches = 0);
  /// The state `samples` samples (all ranks together) into `epoch`, rounded down to a
  /// whole batch of this loader on every rank (batch size x world). An epoch's global order does
  /// not depend on the world or the batch size (DistributedSampler deals it out round-robin), so a
  /// stream saved under another layout continues where it stopped. At or past the epoch's last
  /// whole batch: the start of the next epoch. A state `s` taken under another layout goes on
  /// here as state_at_sample(s.epoch, s.position x s.batch_size x s.world).
  LoaderState state_at_sample(int64_t epoch, int64_t samples) const;
  /// How many leading items of `b` (a batch of this loader) are samples of the epoch rather
  /// than the padding a sampler without drop_last adds so every rank gets as many (repeats
  /// of the epoch's first samples, at most one per rank). An evaluation scores only these,
  /// so its result does not depend on the world size.
  int64_t unpadded(const Batch& b) const;

  const Dataset& dataset() const;
  /// The sampler as given: its epoch() stays the one the stream started at (the loader deals
  /// each epoch from a copy); Batch::epoch and state() say which epoch the stream is in.
  const DistributedSampler& sampler() const;
  const LoaderOptions& options() const;

 private:
  struct Stream;  // what the background thread shares with the loader (loader.cpp)
  void start();
  void stop();
  bool at_end(const LoaderState& s) const { return end_ && s == *end_; }
  // s under this loader's layout and data set (what state() and state_at_sample() return).
  LoaderState stamped(LoaderState s) const;

  LoaderState consumer_;            // next batch to return
  std::optional<LoaderState> end_;  // restore's end: no batch is made or returned from here
  // The batches' source (dataset, sampler, options) and queue. The producer thread holds it too:
  // one left in a get() that does not return is detached with it, and the loader goes on with a new
  // one.
  std::shared_ptr<Stream> stream_;
  std::thread thread_;
};

}  // namespace zt::data
