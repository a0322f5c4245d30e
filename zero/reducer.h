// Bucketed gradient reduce-scatter. As each partitioned parameter's gradient becomes
// final, add() queues it; when the next gradient would take the queue past
// reduce_bucket_size, what is queued is laid out as one bucket, rank-major —
//   [ rank 0: p1 slice 0 | p2 slice 0 | ... ][ rank 1: p1 slice 1 | ... ] ...
// — so ONE reduce-scatter (avg) hands every rank its slices of all parameters in the
// bucket. It runs asynchronously while backward continues; finish() (at drain(), or at a
// flush for buckets already done) writes each rank's slices into its fp32 gradient shards
// (copied for the window's first gradient, added after). Full gradients are freed at
// flush; at most kMaxInFlight buckets are in flight (finished ones are retired at each
// flush), so the reducer's memory is a few buckets whatever the model size.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/param.h"
#include "zero/timeline.h"

namespace zt::zero {

class GradReducer {
 public:
  /// Buckets issued and not yet retired, at most: a rank that runs ahead waits for its
  /// oldest bucket before it lays out the next one.
  static constexpr size_t kMaxInFlight = 2;

  /// Buckets of up to `bucket_elems` elements (reduce_bucket_size). `async` is
  /// overlap_comm: true issues each bucket's reduce-scatter and lets backward go on; false
  /// waits for each bucket (drains it) as soon as it is issued.
  GradReducer(comm::Communicator& comm, int64_t bucket_elems, bool async);

  /// Queues the (final, full) gradient of partitioned parameter `p`; its reduced slice is
  /// written into the record's fp32 grad_shard (which must exist): copied where the record
  /// says the shard holds no gradient of this window yet (ZeroParam::grad_written), else
  /// added. A parameter queued again before its bucket goes (a checkpointed module called
  /// twice) has the two summed. Only the engine marks shards stale again (at each window's
  /// end); a reducer used on its own is handed zeroed shards.
  void add(const Tensor& p);
  /// Reduce-scatters whatever is queued.
  void flush();
  /// Waits for every bucket in flight and writes the results into the shards.
  void drain();
  /// Drops what is queued and what is in flight (waited for, not added: a collective's
  /// buffers must outlive it); the shards keep what earlier buckets added.
  void discard();
  /// Buckets reduced so far; at one rank, flushes (each written into the shards in place).
  int64_t buckets() const { return buckets_; }
  /// What was reduced since clear_layout(), in order: each parameter's name as it joined a
  /// bucket, one per line, and "|" where a bucket was issued. Every rank must reduce the
  /// same layout: the engine compares them at each step (agree_on_window(),
  /// zero/window_check.h).
  const std::string& layout() const { return layout_; }
  void clear_layout() { layout_.clear(); }
  /// Records each bucket, issue to finish, into `t` (null: off).
  void set_timeline(Timeline* t) { timeline_ = t; }

 private:
  struct Entry {
    ZeroParam* z;
    Tensor grad;  // full gradient, flat
  };
  struct Pending {
    std::shared_ptr<comm::Work> work;
    Tensor input;   // [world * S], kept alive until done
    Tensor output;  // [S]
    std::vector<Entry> entries;
    int64_t issued_ns = -1;  // for the timeline
    int64_t number = 0;
  };
  void finish(Pending& p);
  void clear_queue();

  comm::Communicator& comm_;
  int64_t bucket_elems_;
  bool async_;
  std::vector<Entry> queued_;
  std::unordered_map<const ZeroParam*, size_t> queued_at_;  // each queued one's index in queued_
  int64_t queued_elems_ = 0;
  std::deque<Pending> pending_;
  int64_t buckets_ = 0;
  std::string layout_;
  Timeline* timeline_ = nullptr;
};

}  // namespace zt::zero
