// The prefetch coordinator's trace: the order in which modules fetch their parameters
// during one optimizer step (forward and backward). Recorded on the first step, checked
// against every later step; a module arriving out of order invalidates it (the next
// step records again). Knows nothing about communication: the Coordinator asks it what
// to prefetch and whether a released module is reused soon.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::zero {

class Trace {
 public:
  enum class State { kRecording, kValid, kInvalid };

  /// A fetch of module `id` (whose parameters hold `elems` elements). Returns true if it
  /// matched the trace (or was recorded); false if it invalidated the trace.
  bool on_fetch(int id, int64_t elems);
  /// Ends a step: a finished recording becomes valid; an invalid trace records again.
  /// Returns true if a recording just finished. (The ranks' traces are compared before the
  /// step ends: Coordinator::check_ranks_agree().)
  bool end_step();
  /// Discards the trace (invalidated by the caller, e.g. ranks disagree).
  void invalidate();
  /// A step that failed part way: the trace is discarded as by invalidate(), without
  /// counting as an invalidation (the order did not change; the step stopped).
  void abandon() { state_ = State::kInvalid; }

  State state() const { return state_; }
  const std::vector<int>& ids() const { return ids_; }
  /// Module ids expected after the current position, nearest first, as many as fit in
  /// `max_elems` recorded elements together (valid traces only; the prefetch window).
  std::vector<int> upcoming(int64_t max_elems) const;
  /// Elements fetched between the current position and the next fetch of `id`
  /// (exclusive); -1 if `id` does not occur again in this step.
  int64_t reuse_distance(int id) const;
  /// Times the trace was invalidated.
  int64_t invalidations() const { return invalidations_; }

 private:
  State state_ = State::kRecording;
  std::vector<int> ids_;
  std::vector<int64_t> elems_;
  size_t pos_ = 0;
  int64_t invalidations_ = 0;
};

}  // namespace zt::zero
