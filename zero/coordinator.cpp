// Fetch, prefetch and release of module groups along the trace.
#include "zero/coordinator.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <utility>

#include "zero/replicas.h"

namespace zt::zero {

Coordinator::Coordinator(nn::Module& model, comm::Communicator& comm, const Config& config,
                         EngineStats& stats)
    : model_(model), comm_(comm), config_(config), stats_(stats) {
  for (auto& [path, m] : model.named_modules()) {
    ModuleGroup g;
    g.path = path.empty() ? "<root>" : path;
    g.label = comm::CollectiveLabel::intern("module '" + g.path + "'");
    g.module = m.get();
    for (auto& [n, p] : m->local_parameters()) {
      if (!is_partitioned(p)) continue;
      ZeroParam* z = zero_param(p);
      // One tensor under two names of one module is one member: gathered once.
      if (std::find(g.params.begin(), g.params.end(), z) != g.params.end()) continue;
      g.params.push_back(z);
      g.elems += z->part.padded_numel();
    }
    if (!g.params.empty()) groups_.push_back(std::move(g));
  }
  std::unordered_map<const ZeroParam*, std::vector<int>> members;
  for (int id = 0; id < static_cast<int>(groups_.size()); ++id)
    for (const ZeroParam* z : groups_[id].params) members[z].push_back(id);
  for (auto& [z, ids] : members)
    if (ids.size() > 1) tied_.emplace(z, std::move(ids));
  in_use_.assign(groups_.size(), 0);
}

bool Coordinator::needed_elsewhere(const ZeroParam* z, int id, bool training) const {
  if (tied_.empty()) return false;
  auto it = tied_.find(z);
  if (it == tied_.end()) return false;
  for (int other : it->second) {
    if (other == id) continue;
    if (in_use_[other] || (training && kept_for_reuse(other))) return true;
  }
  return false;
}

bool Coordinator::kept_for_reuse(int id) const {
  if (live_elems_ > config_.stage3_max_live_parameters) return false;
  const int64_t d = train_.trace.reuse_distance(id);
  return d >= 0 && d < config_.stage3_max_reuse_distance;
}

// A forward that records a graph, or a checkpoint's first run (its graph comes in
// backward): both follow the training trace. A forward of the model in eval mode is
// inference even with gradients on (an evaluation that forgot its NoGradGuard): it
// follows the inference trace and keeps nothing gathered for a reuse; if a backward does
// come, its fetches gather on demand.
bool Coordinator::in_training_step() const {
  return (autograd::grad_mode_enabled() && model_.is_training()) ||
         autograd::in_checkpoint_forward();
}

void Coordinator::log(const std::string& prefix, int id) {
  if (log_events_) events_.push_back(prefix + groups_[id].path);
}

void Coordinator::set_timeline(Timeline* t) {
  timeline_ = t;
  issued_.assign(groups_.size(), Issued{});
}

// The span of an all-gather: from its issue to the wait that completed it.
void Coordinator::close_gather(int id) {
  if (!timeline_ || issued_[id].ns < 0) return;
  const Issued& is = issued_[id];
  timeline_->span(is.prefetch ? Track::kPrefetch : Track::kFetch, groups_[id].path, is.ns,
                  "\"module\":" + json_quote(groups_[id].path) +
                      ",\"phase\":" + (is.backward ? "\"backward\"" : "\"forward\""));
  issued_[id].ns = -1;
}

void Coordinator::close_all_gathers() {
  if (timeline_)
    for (int id = 0; id < static_cast<int>(groups_.size()); ++id) close_gather(id);
}

void Coordinator::gather(int id, bool prefetch, bool inference) {
  const int64_t t0 = timeline_ && timeline_->active() ? Timeline::now_ns() : -1;
  int64_t n = 0;
  {
    // An inference pass has no step at which the ranks compare the modules they ran, so its
    // gathers (prefetches too) carry their module's name in their signatures: ranks that
    // run different modules of one size fail at the gather, naming both, instead of
    // computing with each other's shards. A training step's are compared at the step, which
    // refuses a divergent step and leaves the communicator usable (a mismatch here aborts it).
    comm::CollectiveLabel label(inference ? groups_[id].label : comm::CollectiveLabel::current());
    n = gather_group(groups_[id].params, comm_);
  }
  if (n == 0) return;
  if (t0 >= 0) issued_[id] = {t0, prefetch, autograd::in_backward()};
  live_elems_ += n;
  ++stats_.gathers_issued;
  if (prefetch) ++stats_.prefetches_issued;
  log(prefetch ? "prefetch:" : "gather:", id);
}

void Coordinator::fetch(int id, bool backward_phase) {
  ModuleGroup& g = groups_[id];
  bool training = backward_phase || in_training_step();
  log(backward_phase ? "fetch_backward:" : "fetch:", id);
  if (training)
    trace_training(id);
  else
    trace_inference(id);
  ++in_use_[id];
  ++calls_;
  gather(id, false, !training);
  prefetch_upcoming(training ? train_ : infer_);
  for (ZeroParam* z : g.params) z->wait();
  close_gather(id);
}

void Coordinator::trace_training(int id) {
  model_call_ = false;  // a training call of the model starts no inference pass
  fetched_.push_back(id);
  if (train_.trace.on_fetch(id, groups_[id].elems)) return;
  stats_.trace_invalidations = train_.trace.invalidations();
  if (reorder_logged_) return;
  reorder_logged_ = true;
  // Every rank sees the same calls: rank 0 says it for all.
  if (comm_.rank() != 0 || config_.quiet) return;
  // A forward in eval mode is an evaluation, traced as one: its backward fetches out of
  // the training order.
  const char* eval_mode = model_.is_training()
                              ? ""
                              : "; or the model is in eval mode in a training step (call "
                                "model->train() after evaluating: Dropout and BatchNorm "
                                "train differently)";
  std::fprintf(stderr,
               "zt: module '%s' (of an engine's %s) fetched out of the recorded order; "
               "prefetching is off until the trace is recorded again. The step ran other "
               "modules than the recorded one (a branch some steps skip: prefetching then "
               "starts over at each change), or a forward with gradients on had no backward "
               "(evaluate under autograd::NoGradGuard)%s\n",
               groups_[id].path.c_str(), model_.type_name().c_str(), eval_mode);
}

// An inference pass has no step to end it, so a pass starts at a top-level fetch (no
// module call under way) that follows a call of the model itself (Engine::forward), or,
// where inference only calls submodules directly (an app's model->encode()), at a
// top-level fetch of the module the trace starts with. There a recording is complete and
// a trace followed to its end starts over. A fetch out of order invalidates the trace and
// releases what was prefetched for it; the next pass records again. Every rank sees the
// same calls, so every rank holds the same trace and issues the same prefetches.
void Coordinator::trace_inference(int id) {
  Trace& t = infer_.trace;
  const bool top = calls_ == 0;
  const bool model_call = std::exchange(model_call_, false);
  if (model_call) model_passes_ = true;
  const bool start =
      top && (model_call || (!model_passes_ && (t.size() == 0 || t.ids().front() == id)));
  if (start) begin_inference_pass(id);
  if (t.state() == Trace::State::kInvalid) return;  // until a pass starts
  if (t.state() == Trace::State::kRecording) {
    if (t.size() == 0 && !start) return;  // a recording begins with a pass
    const size_t max_entries = std::max<size_t>(size_t{1} << 16, 64 * groups_.size());
    if (t.size() >= max_entries) {  // a pass that never ends: no trace to follow
      t.invalidate();
      ++stats_.inference_trace_invalidations;
      return;
    }
  }
  if (t.on_fetch(id, groups_[id].elems)) return;
  ++stats_.inference_trace_invalidations;
  release_idle(id);
}

void Coordinator::begin_inference_pass(int id) {
  Trace& t = infer_.trace;
  if (t.state() == Trace::State::kValid && t.position() < t.size()) {  // the last stopped short
    t.invalidate();
    ++stats_.inference_trace_invalidations;
    release_idle(id);
  }
  t.end_step();  // a recording becomes the trace; a trace starts over; else records anew
  infer_.reset();
}

void Coordinator::release_idle(int fetching) {
  for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
    if (in_use_[g] > 0 || g == fetching) continue;
    bool any = false;
    for (ZeroParam* z : groups_[g].params)
      if (z->releasable() && !needed_elsewhere(z, g, /*training=*/false)) {
        release_param(z);
        any = true;
      }
    if (!any) continue;
    log("release:", g);
    note_released(g);
    close_gather(g);
  }
}

// The window is w.trace.upcoming(bucket): the entries from the trace's position whose
// elements fit in the bucket. Each entry whose group misses parameters is gathered, in
// order, until one would pass the live bound (it is tried again on the next call). An
// entry found complete stays complete until a release (note_released), so a call starts
// where the last one stopped, or at the first entry released since. (A GatheredParameters
// scope inside a step releases what it gathered behind the prefetcher's back: an entry it
// covered may then go unprefetched, and its fetch gathers it.)
void Coordinator::prefetch_upcoming(Walk& w) {
  const Trace& t = w.trace;
  if (t.state() != Trace::State::kValid || config_.stage3_prefetch_bucket_size <= 0) return;
  const size_t pos = t.position();
  size_t i = std::max(pos, std::min(w.next, w.dirty));
  w.dirty = Trace::kNone;
  for (; i < t.size() && t.elems_between(pos, i + 1) <= config_.stage3_prefetch_bucket_size; ++i) {
    const int next = t.id_at(i);
    int64_t missing = 0;
    for (ZeroParam* z : groups_[next].params)
      if (z->status == ParamStatus::kNotAvailable) missing += z->part.padded_numel();
    if (missing == 0) continue;
    if (live_elems_ + missing > config_.stage3_max_live_parameters) break;
    gather(next, true, &w == &infer_);
  }
  w.next = i;
}

void Coordinator::note_released(int id) {
  auto mark = [&](int g) {
    for (Walk* w : {&train_, &infer_})
      w->dirty = std::min(w->dirty, w->trace.next_fetch(g, w->trace.position()));
  };
  mark(id);
  if (tied_.empty()) return;
  for (ZeroParam* z : groups_[id].params) {
    auto it = tied_.find(z);
    if (it != tied_.end())
      for (int g : it->second) mark(g);
  }
}

void Coordinator::release_param(ZeroParam* z) {
  z->release();
  live_elems_ -= z->part.padded_numel();
  ++stats_.releases;
}

void Coordinator::release(int id) {
  // A module that calls itself (or its backward, nested in its own) releases at the
  // outermost call's end only.
  if (in_use_[id] > 0) {
    --in_use_[id];
    --calls_;
  }
  if (in_use_[id] > 0) return;
  bool training = in_training_step() || autograd::in_backward();
  if (training && kept_for_reuse(id)) return;
  log("release:", id);
  bool any = false;
  for (ZeroParam* z : groups_[id].params)
    if (z->releasable() && !needed_elsewhere(z, id, training)) {
      release_param(z);
      any = true;
    }
  if (any) note_released(id);
  if (timeline_ && any) {
    close_gather(id);
    timeline_->instant(Track::kRelease, groups_[id].path,
                       "\"module\":" + json_quote(groups_[id].path));
  }
}

void Coordinator::release_all() {
  close_all_gathers();
  train_.dirty = infer_.dirty = 0;  // everything is to be gathered again
  std::fill(in_use_.begin(), in_use_.end(), 0);
  calls_ = 0;
  for (ModuleGroup& g : groups_)
    for (ZeroParam* z : g.params)
      if (z->releasable()) release_param(z);
}

// After a failure: what is gathered goes; a gather still in flight stays so (finishing it
// would allocate, which may be what failed): the next fetch or release finishes it, or
// ~Engine drops it.
void Coordinator::abandon(int id) {
  calls_ -= in_use_[id];
  in_use_[id] = 0;
  fetched_.clear();  // a retried forward starts the comparison over
  abandon_trace();
  for (ZeroParam* z : groups_[id].params)
    if (z->status == ParamStatus::kAvailable && z->releasable() &&
        !needed_elsewhere(z, id, /*training=*/true))
      release_param(z);
}

void Coordinator::abandon_trace() {
  for (Walk* w : {&train_, &infer_}) {
    w->trace.abandon();
    w->reset();
  }
}

void Coordinator::abandon_step() {
  close_all_gathers();
  for (int id = 0; id < static_cast<int>(groups_.size()); ++id) abandon(id);
}

void Coordinator::regather_persistent() {
  close_all_gathers();
  train_.dirty = infer_.dirty = 0;
  for (ModuleGroup& g : groups_)
    for (ZeroParam* z : g.params)
      if (z->status != ParamStatus::kNotAvailable) release_param(z);
  // Nothing is gathered now, whatever the count said (a new engine finds the gathered
  // copies an earlier engine on this model left, which this one never counted).
  live_elems_ = 0;
  for (ModuleGroup& g : groups_) {
    // Held ones (a GatheredParameters scope open across the step) come back too, but are
    // not counted: the scope that holds them releases them (or its gather did not count).
    std::vector<ZeroParam*> persistent, held;
    for (ZeroParam* z : g.params)
      if (z->persistent)
        persistent.push_back(z);
      else if (z->holds > 0)
        held.push_back(z);
    live_elems_ += gather_group(persistent, comm_);
    gather_group(held, comm_);
    for (ZeroParam* z : persistent) z->wait();
    for (ZeroParam* z : held) z->wait();
  }
}

void Coordinator::end_step() {
  train_.trace.end_step();
  fetched_.clear();
  train_.reset();
  stats_.trace_invalidations = train_.trace.invalidations();
}

uint64_t Coordinator::fetches_hash() const {
  return fnv1a(fetched_.data(), fetched_.size() * sizeof(int));
}

void Coordinator::check_ranks_agree() {
  std::string mine;
  for (int id : fetched_) mine += groups_[id].path + "\n";
  std::vector<std::string> all = comm_.all_gather_bytes(mine);
  bool same = true;
  for (const std::string& s : all) same = same && s == mine;
  if (same) return;
  // Name the first differing module on each rank.
  std::vector<std::vector<std::string>> lists;
  for (const std::string& s : all) {
    std::vector<std::string> l;
    std::istringstream is(s);
    for (std::string line; std::getline(is, line);) l.push_back(line);
    lists.push_back(l);
  }
  size_t i = 0;
  for (;; ++i) {
    bool differ = false;
    for (auto& l : lists)
      differ = differ || i >= l.size() || i >= lists[0].size() || l[i] != lists[0][i];
    if (differ) break;
  }
  std::ostringstream os;
  os << "ranks ran different modules of this engine's " << model_.type_name()
     << " during this step; first difference at fetch #" << i << ":";
  for (size_t r = 0; r < lists.size(); ++r)
    os << " rank " << r << " ran '" << (i < lists[r].size() ? lists[r][i] : "<nothing>") << "';";
  train_.trace.invalidate();
  stats_.trace_invalidations = train_.trace.invalidations();
  os << " every rank must run the same modules in the same order under ZeRO-3 (this window's "
        "gradients are discarded): run a branch that some ranks' batches do not use (an "
        "expert a router did not pick) on every rank, its output multiplied by 0 there";
  throw comm::AgreedError(os.str(), comm_.rank());  // every rank compared the same lists
}

}  // namespace zt::zero
