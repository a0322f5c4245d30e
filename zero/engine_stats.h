// zero::EngineStats: what Engine::stats() counts on one rank (the Coordinator fills the
// gather, release and trace counters; the engine the steps).
#pragma once

#include <cstdint>

namespace zt::zero {

/// Counters of one rank since the engine was built (steps also restored by a load).
struct EngineStats {
  int64_t steps = 0;        ///< optimizer steps applied (global_step())
  int64_t micro_steps = 0;  ///< step() calls past their checks (one per micro-batch)
  /// All-gathers started for module calls (one per module group; fetch + prefetch); the
  /// re-gathers of persistent parameters (at construction, after each step and after a
  /// checkpoint load) are not counted.
  int64_t gathers_issued = 0;
  int64_t prefetches_issued = 0;    ///< of which ahead of need
  int64_t releases = 0;             ///< parameters released
  int64_t trace_invalidations = 0;  ///< times the training trace was found out of order
  /// Times an inference pass left the inference trace (a different pass; not an error).
  int64_t inference_trace_invalidations = 0;
  /// Gradient buckets reduce-scattered; at one rank, flushes of the queued gradients (each
  /// written into the shards in place: no bucket, no collective).
  int64_t buckets_reduced = 0;
  int64_t overflow_skips = 0;  ///< fp16 steps skipped for an overflow
  /// verify_replicas() runs that passed: the one at construction, one after each applied
  /// step that buffers.verify_every selects (a skipped fp16 step runs none), the one ending
  /// a checkpoint load, and the caller's own.
  int64_t replica_verifications = 0;
};

}  // namespace zt::zero
