// SpanTimer: the summed time of spans of work on one device, without a host wait per span.
// On the CPU a span is the host clock's time from begin() to end() (the work runs inside).
// On a GPU, begin() and end() record events on the current stream, which must be the same
// stream for every span of a timer (an error names the two otherwise), and take_seconds()
// waits for the last one: the GPU time of the work issued in between, read where a
// training loop reads its results anyway (a log step), not once per span. The vqgpt loop
// times its tokenizer's share of a step with it.
#pragma once

#include <memory>

#include "core/device.h"

namespace zt {

class SpanTimer {
 public:
  explicit SpanTimer(Device device);
  ~SpanTimer();
  SpanTimer(const SpanTimer&) = delete;
  SpanTimer& operator=(const SpanTimer&) = delete;

  /// Starts a span (error while one is open).
  void begin();
  /// Ends the open span (error when none is).
  void end();
  /// Seconds summed over the spans ended since the last call (0 for none); waits for them
  /// on a GPU (one host wait, counted as every one is in core/work_counts.h).
  double take_seconds();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt
