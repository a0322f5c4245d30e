// The gather coordinator: which parameters are gathered when. The unit is a module group
// (a module and the partitioned parameters it owns itself): fetch() gathers a group with
// ONE all-gather (zero::GroupGather) and prefetches the groups the trace expects next;
// release() frees a group unless the training trace reuses it soon (a member that is
// tied to another group stays while that group needs it). Training steps and inference
// passes follow two traces, so an evaluation between steps disturbs neither. Two documented
// bounds from zero::Config limit what is gathered:
//   stage3_prefetch_bucket_size  elements ahead of the current module (the window)
//   stage3_max_live_parameters   gathered elements held at once (prefetch stops there,
//                                and no group is kept for reuse past it)
// and stage3_max_reuse_distance keeps a released group gathered when it comes back
// within that many elements. The hooks (zero/hooks.h) decide when to call it.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "nn/module.h"
#include "zero/comm/communicator.h"
#include "zero/config.h"
#include "zero/engine_stats.h"
#include "zero/param.h"
#include "zero/timeline.h"
#include "zero/trace.h"

namespace zt::zero {

/// A module that owns partitioned parameters, and those parameters. A tied parameter (one
/// tensor registered in two modules, as a language model's token table and output head)
/// is a member of each of its modules' groups.
struct ModuleGroup {
  std::string path;  // dotted module path, "<root>" for the model itself
  // "module '<path>'": the collective label of its gathers in inference, so ranks that
  // gather different modules of one size fail at the gather naming both.
  const char* label = nullptr;
  nn::Module* module = nullptr;
  std::vector<ZeroParam*> params;
  int64_t elems = 0;  // padded elements of its parameters
};

class Coordinator {
 public:
  /// Groups every module of `model` owning partitioned parameters (registration order).
  Coordinator(nn::Module& model, comm::Communicator& comm, const Config& config,
              EngineStats& stats);

  /// The module groups, indexed by the ids the hooks pass (registration order).
  const std::vector<ModuleGroup>& groups() const { return groups_; }
  /// The prefetch trace of training steps.
  const Trace& trace() const { return train_.trace; }
  /// The prefetch trace of inference passes (forwards under NoGradGuard or in eval mode).
  const Trace& inference_trace() const { return infer_.trace; }

  /// Makes group `id` AVAILABLE: records it in its mode's trace, gathers what is missing,
  /// prefetches along that trace and waits.
  void fetch(int id, bool backward_phase);
  /// Releases group `id` unless the trace reuses it within stage3_max_reuse_distance,
  /// leaving gathered any tied member another group still needs.
  void release(int id);
  /// Releases every releasable parameter (end of backward, skipped step).
  void release_all();
  /// Group `id`'s call failed: releases its gathered parameters (a local act: no
  /// collective, no allocation; a gather in flight is left for the next fetch or release
  /// to finish) and abandons the step's trace, so that a retried forward neither finds
  /// the group in use nor breaks the recorded order.
  void abandon(int id);
  /// A backward or step failed: abandon() for every group.
  void abandon_step();
  /// A forward failed: the traces cannot be trusted (a retry starts over).
  void abandon_trace();
  /// The model itself is called (Engine::forward): in inference, a pass starts at the
  /// next fetch.
  void on_model_call() { model_call_ = true; }
  /// Drops every gathered copy, persistent ones too (their values are stale), then
  /// gathers again the persistent parameters and those a scope holds.
  void regather_persistent();
  /// A hash of the modules this step fetched in training (forward and backward, in
  /// order), which the ranks compare before every update.
  uint64_t fetches_hash() const;
  /// Checks that every rank fetched the same modules in the same order (an error naming
  /// the first difference). Every rank calls it, before the update of a step whose
  /// fetches_hash() differs between ranks, so a divergent step is refused before it
  /// changes anything.
  void check_ranks_agree();
  /// Ends a step in the trace (a finished recording becomes the trace prefetch follows).
  void end_step();

  /// When on, records "fetch:<module>", "gather:<module>", "prefetch:<module>",
  /// "release:<module>", "forward_end:<module>", "fetch_backward:<module>".
  void set_event_log(bool on) { log_events_ = on; }
  /// Records `prefix` + group `id`'s path when the event log is on (the hooks log
  /// "forward_end:"; the coordinator the rest).
  void log(const std::string& prefix, int id);
  const std::vector<std::string>& events() const { return events_; }
  /// Records gathers (issue to completed wait) and releases into `t` (null: off).
  void set_timeline(Timeline* t);
  Timeline* timeline() const { return timeline_; }

 private:
  // A trace and the prefetcher's walk of it: entries before `next` (from the trace's
  // position on) were gathered or found gathered, and stay so unless released; `dirty`
  // is the first entry whose group lost parameters since (each call then walks only the
  // window's new entries, not the whole window again).
  struct Walk {
    Trace trace;
    size_t next = 0;
    size_t dirty = Trace::kNone;
    void reset() {
      next = 0;
      dirty = Trace::kNone;
    }
  };

  bool in_training_step() const;
  // Gathers group `id` (a prefetch, or its own fetch); an inference gather is labelled with
  // the group (ModuleGroup::label).
  void gather(int id, bool prefetch, bool inference);
  // Group `id`'s fetch in its mode's trace: followed, recorded or found out of order.
  void trace_training(int id);
  void trace_inference(int id);
  // An inference pass starts at group `id`'s fetch (see trace_inference()).
  void begin_inference_pass(int id);
  // Gathers the modules `w`'s trace says come next (at its position, just past the module
  // being fetched), as far as the prefetch bucket and the live bound allow.
  void prefetch_upcoming(Walk& w);
  // A release of group `id`'s parameters (and so of the groups tied to them): their next
  // fetches must be looked at again by the prefetchers.
  void note_released(int id);
  // Releases the groups no call is using but `fetching` (an inference pass left the trace:
  // what was prefetched for it will not be fetched).
  void release_idle(int fetching);
  void release_param(ZeroParam* z);
  /// Group `id` stays gathered for a reuse within stage3_max_reuse_distance, but only
  /// while the gathered elements stay within stage3_max_live_parameters (the bound holds
  /// for kept modules too).
  bool kept_for_reuse(int id) const;
  /// A tied parameter that another group holding it still needs: it is between its fetch
  /// and its release (an enclosing module), or (training) kept for its reuse.
  bool needed_elsewhere(const ZeroParam* z, int id, bool training) const;
  void close_gather(int id);
  void close_all_gathers();

  const nn::Module& model_;
  comm::Communicator& comm_;
  const Config& config_;
  EngineStats& stats_;
  std::vector<ModuleGroup> groups_;
  // Tied parameters and the groups they are members of; which groups are in use (fetched
  // and not yet released), so that one group's release leaves a tied parameter gathered
  // while another still computes with it (an enclosing module) or will soon.
  std::unordered_map<const ZeroParam*, std::vector<int>> tied_;
  std::vector<int> in_use_;    // calls under way: fetches not yet released (nested: several)
  int calls_ = 0;              // the sum of in_use_: 0 between top-level module calls
  bool model_call_ = false;    // the model was called since the last fetch
  bool model_passes_ = false;  // inference passes begin with calls of the model
  std::vector<int> fetched_;   // this step's training fetches, in order
  Walk train_, infer_;
  int64_t live_elems_ = 0;  // gathered elements, for stage3_max_live_parameters
  bool log_events_ = false;
  bool reorder_logged_ = false;  // the first out-of-order fetch was reported (once per run)
  std::vector<std::string> events_;
  Timeline* timeline_ = nullptr;
  struct Issued {
    int64_t ns = -1;  // when the group's all-gather was issued; -1: none open
    bool prefetch = false;
    bool backward = false;
  };
  std::vector<Issued> issued_;  // per group, for the timeline
};

}  // namespace zt::zero
