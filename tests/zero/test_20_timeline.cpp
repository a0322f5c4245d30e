// Lesson 20 — seeing when things happen.
// Invariant: the timeline (Engine::set_timeline, a Chrome trace event file) shows the
// order ZeRO-3 relies on: every all-gather of a module is waited for before that module's
// compute begins; with prefetching on, a module's all-gather is already in flight
// (issued, not yet waited for) while the previous module computes. A span runs from issue
// to the wait that completed it, so this shows the issue order, not how fast the
// collective ran. Gradient buckets are reduce-scattered while backward goes on (overlap:
// a bucket is issued before the last module's backward ends). The memory counter sampled
// at every event shows the gathered parameters never exceed the module computing plus the
// prefetch window, and all tags together stay under a memory limit set just above what
// the run needs; only the requested number of steps is recorded, however long the run;
// and saving and loading a checkpoint record spans on the checkpoint track by themselves.
//
// Run alone: ctest --test-dir build -R zero.Lesson20
#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "zero/checkpoint_util.h"

using namespace zt;
using nlohmann::json;

namespace {

constexpr int64_t kWidth = 48, kDepth = 6;
constexpr int kSteps = 5, kTraced = 2;
// Per rank: the ledger's bound, which the counter shows. The run peaks near 200 KiB, so the
// limit binds: a run that held much more would fail.
constexpr int64_t kLimit = 256 << 10;
constexpr int64_t kLayerElems = kWidth * (kWidth + 1);  // one layer's weight and bias
constexpr int64_t kWindowLayers = 2;                    // prefetched ahead of a fetch

struct Span {
  std::string track, module;
  double ts, end;
};

// Trains kSteps on 2 thread ranks with the timeline on for the first kTraced steps,
// saving and loading a checkpoint in `ckpt_root` after the first step.
json train_and_read(const std::string& path, const std::string& ckpt_root) {
  comm::run_threads(2, [&](comm::Communicator& comm) {
    current_ledger()->set_limit(Device::cpu(), kLimit);
    manual_seed(5);
    auto m = lesson::partitioned<lesson::TanhStack>(comm, kDepth, kWidth);
    zero::Config c = lesson::eager_release_config();
    c.stage3_prefetch_bucket_size = kWindowLayers * kLayerElems;  // prefetch on
    c.reduce_bucket_size = kWidth * kWidth;
    zero::Engine engine(m, comm, c, {});
    engine.set_timeline(path, kTraced);
    for (int s = 0; s < kSteps; ++s) {
      Generator g(s);
      Tensor x = randn({4, kWidth}, g);
      // An app's span around the step that writes the timeline ends after the write: it
      // records nothing (it wrote into the timeline the write had freed).
      zero::TimelineSpan around(s == kTraced - 1 ? engine.timeline() : nullptr,
                                zero::Track::kCheckpoint, "around the writing step");
      engine.backward(sum(engine(x)));
      engine.step();
      if (s == 0) {  // the engine records these spans; the test adds none
        std::string dir = zero::save_checkpoint(engine, ckpt_root, "first");
        zero::load_checkpoint(engine, dir);
      }
    }
    engine.write_timeline();  // already written at step kTraced: a no-op
  });
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return json::parse(f);
}

}  // namespace

TEST(Lesson20Timeline, GathersPrecedeComputeAndPrefetchOverlapsIt) {
  const lesson::TempDir tmp;
  json doc = train_and_read(tmp / "timeline.json", tmp / "checkpoints");
  ASSERT_TRUE(doc.contains("traceEvents"));

  std::map<int, std::vector<Span>> spans;  // by rank
  std::map<int, std::map<std::string, int>> names;
  std::map<int, int> counters;
  std::map<int, int64_t> max_gathered, max_total;  // bytes
  std::map<int, std::vector<std::string>> checkpoint_names;
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    const int pid = e["pid"];
    if (ph == "M" && e["name"] == "thread_name") names[pid][e["args"]["name"]] = e["tid"];
    if (ph == "C") {
      ++counters[pid];
      const int64_t gathered = e["args"]["gathered_param"].get<int64_t>();
      max_gathered[pid] = std::max(max_gathered[pid], gathered);
      int64_t total = 0;  // every tag's bytes at that moment
      for (const auto& [tag, bytes] : e["args"].items()) total += bytes.get<int64_t>();
      max_total[pid] = std::max(max_total[pid], total);
    }
    if (ph == "X") {
      const double ts = e["ts"], dur = e["dur"];
      EXPECT_GE(dur, 0.0);
      EXPECT_NE(e["name"], "around the writing step") << "recorded after the write";
      std::string module = e.contains("args") && e["args"].contains("module")
                               ? e["args"]["module"].get<std::string>()
                               : "";
      spans[pid].push_back({e["cat"], module, ts, ts + dur});
      if (e["cat"] == "checkpoint") checkpoint_names[pid].push_back(e["name"]);
    }
  }
  ASSERT_EQ(spans.size(), 2u) << "one process (pid) per rank";
  for (auto& [rank, list] : spans) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    for (const char* t : {"forward", "backward", "all-gather (fetch)", "all-gather (prefetch)",
                          "reduce-scatter", "optimizer", "release"})
      EXPECT_TRUE(names[rank].count(t)) << "no track named '" << t << "'";
    EXPECT_GT(counters[rank], 0) << "no memory samples";
    EXPECT_LE(max_total[rank], kLimit) << "the counter never shows more than the limit";
    EXPECT_GT(max_total[rank], kLimit / 2) << "the limit is close to what the run needs";
    // The gathered parameters: the layer computing and at most the window ahead of it.
    const int64_t layer_bytes = kLayerElems * 4;
    EXPECT_LE(max_gathered[rank], (1 + kWindowLayers) * layer_bytes);
    EXPECT_GT(max_gathered[rank], layer_bytes) << "prefetched layers were held";

    std::map<std::string, int> per_track;
    for (const Span& s : list) ++per_track[s.track];
    EXPECT_EQ(per_track["optimizer"], kTraced) << "bounded to the traced steps";
    EXPECT_EQ(per_track["forward"], kTraced * kDepth) << "bounded to the traced steps";
    EXPECT_TRUE(names[rank].count("checkpoint")) << "no track named 'checkpoint'";
    ASSERT_EQ(checkpoint_names[rank].size(), 2u) << "one save and one load span";
    EXPECT_EQ(checkpoint_names[rank][0], "save first");
    EXPECT_EQ(checkpoint_names[rank][1].rfind("load ", 0), 0u) << checkpoint_names[rank][1];

    // Every gather of a module is waited for before the next compute of that module begins.
    int checked = 0, overlapping = 0;
    for (const Span& g : list) {
      if (g.track != "all-gather (fetch)" && g.track != "all-gather (prefetch)") continue;
      const Span* next = nullptr;
      for (const Span& c : list)
        if ((c.track == "forward" || c.track == "backward") && c.module == g.module &&
            c.ts >= g.ts && (!next || c.ts < next->ts))
          next = &c;
      if (!next) continue;  // released unused at the end of a step
      EXPECT_LE(g.end, next->ts + 1e-3)
          << g.track << " of " << g.module << " ends after its compute began";
      ++checked;
      if (g.track != "all-gather (prefetch)") continue;
      for (const Span& c : list)
        if (c.track == "forward" && c.module != g.module && c.ts < g.end && c.end > g.ts) {
          ++overlapping;
          break;
        }
    }
    EXPECT_GE(checked, kTraced * kDepth) << "fewer gathers followed by a compute than modules";
    EXPECT_GT(overlapping, 0) << "no prefetch was in flight while another module computed";

    // Reduce-scatter overlaps backward (overlap_comm, on by default): a bucket (here one
    // layer's gradients) is still in flight, issued and not yet waited for, when the
    // backward of an earlier layer begins.
    int overlapped = 0;
    for (const Span& rs : list) {
      if (rs.track != "reduce-scatter") continue;
      for (const Span& b : list)
        if (b.track == "backward" && b.ts > rs.ts && b.ts < rs.end) {
          ++overlapped;
          break;
        }
    }
    EXPECT_GT(overlapped, 0) << "no backward ran while a bucket was reduced";
  }
}
