// Timeline recording and the Chrome trace event JSON it writes.
#include "zero/timeline.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <set>

#include "core/error.h"
#include "core/text_file.h"

namespace zt::zero {

const char* track_name(Track t) {
  switch (t) {
    case Track::kForward:
      return "forward";
    case Track::kBackward:
      return "backward";
    case Track::kFetch:
      return "all-gather (fetch)";
    case Track::kPrefetch:
      return "all-gather (prefetch)";
    case Track::kRelease:
      return "release";
    case Track::kReduceScatter:
      return "reduce-scatter";
    case Track::kOptimizer:
      return "optimizer";
    case Track::kCheckpoint:
      return "checkpoint";
  }
  return "?";
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

Timeline::Timeline(int rank, int64_t max_steps, Device device)
    : rank_(rank), max_steps_(max_steps), device_(device), ledger_(current_ledger()) {
  ZT_CHECK(max_steps >= 1, "zero::Timeline: steps to record must be >= 1, got ", max_steps,
           " (train.trace_steps)");
}

int64_t Timeline::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Spans of one track that overlap without nesting (prefetches, buckets in flight) go to
// separate lanes, so every lane is a well-formed row.
int Timeline::lane_for(Track track, int64_t begin_ns, int64_t end_ns) {
  auto t = static_cast<size_t>(track);
  if (lane_end_.size() <= t) lane_end_.resize(t + 1);
  std::vector<int64_t>& lanes = lane_end_[t];
  if (track == Track::kForward || track == Track::kBackward) {  // module calls nest
    if (lanes.empty()) lanes.push_back(end_ns);
    return 0;
  }
  for (size_t l = 0; l < lanes.size(); ++l)
    if (lanes[l] <= begin_ns) {
      lanes[l] = end_ns;
      return static_cast<int>(l);
    }
  if (lanes.size() == kLanesPerTrack) {  // the last lane takes the rest (rows may then overlap)
    lanes.back() = std::max(lanes.back(), end_ns);
    return kLanesPerTrack - 1;
  }
  lanes.push_back(end_ns);
  return static_cast<int>(lanes.size() - 1);
}

void Timeline::sample_memory(int64_t ts_ns) {
  MemoryCounters c = ledger_->counters(device_);
  if (sampled_ && c.current == last_sample_.current) return;
  std::string args;
  for (int i = 0; i < kNumMemTags; ++i) {
    if (i) args += ',';
    args += json_quote(mem_tag_name(static_cast<MemTag>(i))) + ":" + std::to_string(c.current[i]);
  }
  events_.push_back({'C', Track::kForward, 0, ts_ns, 0, "memory " + device_.str(), args});
  last_sample_ = c;
  sampled_ = true;
}

void Timeline::span(Track track, const std::string& name, int64_t begin_ns,
                    const std::string& args) {
  if (!active()) return;
  int64_t end_ns = now_ns();
  const int lane = lane_for(track, begin_ns, end_ns);
  events_.push_back({'X', track, lane, begin_ns, end_ns - begin_ns, name, args});
  sample_memory(end_ns);
}

void Timeline::instant(Track track, const std::string& name, const std::string& args) {
  if (!active()) return;
  int64_t ts = now_ns();
  events_.push_back({'i', track, 0, ts, 0, name, args});
  sample_memory(ts);
}

int64_t Timeline::first_ns() const {
  int64_t first = INT64_MAX;
  for (const Event& e : events_) first = std::min(first, e.ts_ns);
  return first;
}

static std::string micros(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1000.0);
  return buf;
}

std::string Timeline::events_json(int64_t origin_ns) const {
  std::string out;
  const std::string pid = std::to_string(rank_);
  auto add = [&](const std::string& obj) {
    if (!out.empty()) out += ",\n";
    out += obj;
  };
  add("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"args\":{\"name\":\"rank " +
      pid + "\"}}");
  add("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
      ",\"args\":{\"sort_index\":" + pid + "}}");
  std::set<std::pair<Track, int>> rows;  // (track, lane)
  for (const Event& e : events_)
    if (e.ph != 'C') rows.insert({e.track, e.lane});
  for (const auto& [track, lane] : rows) {
    const int tid = tid_of(track, lane);
    std::string name = track_name(track);
    if (lane) name += " #" + std::to_string(lane + 1);
    add("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid +
        ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":" + json_quote(name) + "}}");
    add("{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid + ",\"tid\":" +
        std::to_string(tid) + ",\"args\":{\"sort_index\":" + std::to_string(tid) + "}}");
  }
  for (const Event& e : events_) {
    std::string o = "{\"ph\":\"";
    o += e.ph;
    o += "\",\"name\":" + json_quote(e.name) + ",\"pid\":" + pid +
         ",\"tid\":" + std::to_string(e.ph == 'C' ? 0 : tid_of(e.track, e.lane)) +
         ",\"ts\":" + micros(e.ts_ns - origin_ns);
    if (e.ph == 'X') o += ",\"dur\":" + micros(e.dur_ns);
    if (e.ph == 'i') o += ",\"s\":\"t\"";
    if (e.ph != 'C') o += ",\"cat\":" + json_quote(track_name(e.track));
    if (!e.args.empty()) o += ",\"args\":{" + e.args + "}";
    add(o + "}");
  }
  return out;
}

void Timeline::write(const std::string& path, const std::vector<std::string>& rank_events) {
  std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  for (const std::string& r : rank_events) {
    if (r.empty()) continue;
    if (!first) text += ",\n";
    text += r;
    first = false;
  }
  text += "\n]}\n";
  try {
    write_text_atomically(path, text);
  } catch (const Error& e) {
    ZT_FAIL("zero::Timeline: ", e.what(), " (train.trace)");
  }
}

TimelineSpan::TimelineSpan(Timeline* timeline, Track track, std::string name)
    : timeline_(timeline),
      track_(track),
      name_(std::move(name)),
      begin_ns_(timeline ? Timeline::now_ns() : 0) {}

TimelineSpan::~TimelineSpan() {
  if (timeline_) timeline_->span(track_, name_, begin_ns_);
}

}  // namespace zt::zero
