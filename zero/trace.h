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

  // Random access to a valid trace (the prefetcher walks it without copying it; each
  // call is constant time, next_fetch logarithmic in the module's fetches).
  static constexpr size_t kNone = static_cast<size_t>(-1);
  /// The index of the next fetch expected (fetches before it have happened this step).
  size_t position() const { return pos_; }
  size_t size() const { return ids_.size(); }
  int id_at(size_t i) const { return ids_[i]; }
  /// Elements fetched by trace entries [a, b).
  int64_t elems_between(size_t a, size_t b) const { return starts_[b] - starts_[a]; }
  /// The first index at or after i where `id` is fetched; kNone if there is none (or the
  /// trace is not valid).
  size_t next_fetch(int id, size_t i) const;

 private:
  State state_ = State::kRecording;
  std::vector<int> ids_;
  std::vector<int64_t> elems_;
  // Of a valid trace: starts_[i] = elements of entries [0, i) (size + 1 of them), and each
  // module id's entry indices in order.
  std::vector<int64_t> starts_;
  std::vector<std::vector<size_t>> fetches_of_;
  size_t pos_ = 0;
  int64_t invalidations_ = 0;
};

}  // namespace zt::zero
