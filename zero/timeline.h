// zero::Timeline: what each rank did when, as a Chrome trace event file (opens in the
// Perfetto UI or chrome://tracing). The engine records into it while it is enabled:
// module forward and backward compute, all-gathers (on-demand fetches and prefetches,
// each from issue to the wait that completed it), releases, reduce-scatter buckets (issue
// to finish), the optimizer step, and spans an application adds (a checkpoint save). At
// every event it samples the rank's memory ledger: a counter track of bytes per tag.
// Only the first `max_steps` optimizer steps are recorded, so long runs stay small.
//
// File layout: {"traceEvents": [...], "displayTimeUnit": "ms"}; pid = rank, tid = track
// (several lanes per track where spans overlap: tid = kLanesPerTrack * track + lane; lanes
// past the last share it), "M" events name them; "X" complete events with ts/dur in microseconds
// since the first event of any rank; "i" instants for releases; "C" counters named "memory
// <device>".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"

namespace zt::zero {

/// The rows of a rank in the trace.
enum class Track : int {
  kForward = 1,
  kBackward = 2,
  kFetch = 3,     // all-gathers a module waits for right away
  kPrefetch = 4,  // all-gathers issued ahead of need
  kRelease = 5,
  kReduceScatter = 6,
  kOptimizer = 7,
  kCheckpoint = 8,
};
const char* track_name(Track t);

class Timeline {
 public:
  /// Records on rank `rank` for the first `max_steps` optimizer steps (>= 1), sampling
  /// memory of `device` in the calling thread's ledger.
  Timeline(int rank, int64_t max_steps, Device device);

  /// Nanoseconds on the monotonic clock every rank (thread or process) shares.
  static int64_t now_ns();
  /// True while the recorded steps are fewer than max_steps.
  bool active() const { return step_ < max_steps_; }
  int64_t steps_recorded() const { return step_; }
  /// Ends an optimizer step (later events of a step past max_steps are dropped).
  void end_step() { ++step_; }
  /// Stops recording and frees the events (once written): a TimelineSpan still open on
  /// it records nothing.
  void close() {
    max_steps_ = step_;
    events_ = {};
  }

  /// A span [begin_ns, now] on `track` named `name`; `args` is a JSON object body
  /// ("\"module\":\"l0\"") or empty.
  void span(Track track, const std::string& name, int64_t begin_ns, const std::string& args = "");
  /// A zero-length event now.
  void instant(Track track, const std::string& name, const std::string& args = "");

  /// Time of this rank's first event (INT64_MAX when none).
  int64_t first_ns() const;
  /// This rank's events and track names, a comma-separated list of JSON objects, with
  /// timestamps relative to `origin_ns` (the earliest first_ns() of all ranks).
  std::string events_json(int64_t origin_ns) const;
  /// Writes the events of every rank (events_json() of each) into one file at `path`.
  static void write(const std::string& path, const std::vector<std::string>& rank_events);
  /// Events recorded (counter samples included).
  size_t size() const { return events_.size(); }

 private:
  static constexpr int kLanesPerTrack = 1000;
  struct Event {
    char ph;      // 'X', 'i' or 'C'
    Track track;  // of 'X' and 'i'
    int lane;     // of 'X': its row among the track's overlapping spans
    int64_t ts_ns, dur_ns;
    std::string name, args;
  };
  static int tid_of(Track track, int lane) {
    return kLanesPerTrack * static_cast<int>(track) + lane;
  }
  int lane_for(Track track, int64_t begin_ns, int64_t end_ns);
  void sample_memory(int64_t ts_ns);

  int rank_;
  int64_t max_steps_;
  Device device_;
  std::shared_ptr<MemoryLedger> ledger_;
  int64_t step_ = 0;
  std::vector<Event> events_;
  std::vector<std::vector<int64_t>> lane_end_;  // per track, per lane: end of its last span
  MemoryCounters last_sample_{};
  bool sampled_ = false;
};

/// Records a span on `timeline` (if not null and active) from construction to
/// destruction, e.g. a checkpoint save.
class TimelineSpan {
 public:
  TimelineSpan(Timeline* timeline, Track track, std::string name);
  ~TimelineSpan();
  TimelineSpan(const TimelineSpan&) = delete;
  TimelineSpan& operator=(const TimelineSpan&) = delete;

 private:
  Timeline* timeline_;
  Track track_;
  std::string name_;
  int64_t begin_ns_;
};

/// A JSON string literal for `s` (quotes and escapes).
std::string json_quote(const std::string& s);

}  // namespace zt::zero
