// Engine's timeline plumbing: recording the first steps of a run (zero/timeline.h) and
// writing them as one Chrome trace for all ranks (the engine itself is in engine.cpp;
// the destructor writes a per-rank fallback for a run that ended first).
#include <algorithm>
#include <cstdio>
#include <string>

#include "zero/engine.h"

namespace zt::zero {

void Engine::set_timeline(const std::string& path, int64_t steps) {
  ZT_CHECK(!path.empty(), "Engine::set_timeline: empty path; give a file name like trace.json");
  const Device dev = device();
  timeline_ = std::make_unique<Timeline>(comm_.rank(), steps, dev);
  timeline_path_ = path;
  timeline_written_ = false;
  coordinator_->set_timeline(timeline_.get());
  reducer_->set_timeline(timeline_.get());
}

void Engine::end_timeline_step() {
  if (!timeline_ || timeline_written_) return;
  timeline_->end_step();
  if (!timeline_->active()) write_timeline();
}

void Engine::write_timeline() {
  if (!timeline_ || timeline_written_) return;
  timeline_written_ = true;
  coordinator_->set_timeline(nullptr);
  reducer_->set_timeline(nullptr);
  // One clock origin for all ranks: the earliest first event.
  int64_t origin = timeline_->first_ns();
  for (const std::string& s : comm_.all_gather_bytes(std::to_string(origin)))
    origin = std::min<int64_t>(origin, std::stoll(s));
  std::vector<std::string> all = comm_.all_gather_bytes(timeline_->events_json(origin));
  if (comm_.rank() == 0) {
    Timeline::write(timeline_path_, all);
    if (!config_.quiet)
      std::fprintf(stderr, "zt: timeline of %ld step(s) on %d rank(s) written to %s\n",
                   static_cast<long>(timeline_->steps_recorded()), comm_.size(),
                   timeline_path_.c_str());
  }
  // Kept, closed: an app's TimelineSpan around the step that wrote it still points here.
  timeline_->close();
}

}  // namespace zt::zero
