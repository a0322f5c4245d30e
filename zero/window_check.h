// What every rank must agree on before an update, settled in one small exchange per step
// (none with one rank):
// - the gradient layout. Each rank's reducer reduce-scatters the parameters that got a
//   gradient on that rank, in the order they got it. A parameter that got one on some
//   ranks only (a branch that some ranks' losses skip) shifts the buckets against the
//   other ranks'; where the buckets happen to have equal sizes the collective pairs
//   different parameters' slices and raises nothing. Here it is an error before the update.
// - whether a replicated parameter was written outside the engine since the last check (a
//   load on rank 0 only, after the engine was built): then the replicas are verified
//   before the update;
// - the modules each rank fetched (forward and backward, in order). Ranks that ran
//   different modules gathered different parameters; where the gathers happen to have
//   equal sizes they paired one module's slices with another's and raised nothing (frozen
//   modules leave no gradient for the layout check to see). Then every rank compares the
//   lists, for an error naming the first difference, before the update;
// - which buffers averaged at the step each rank wrote outside the model's forwards since
//   the last one (zero/buffer_writes.h; a broadcast counts as a write everywhere): one
//   written on some ranks only would be mixed into every rank's value by the average, and
//   is an error naming it and the ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"

namespace zt::zero {

/// What some rank reported (with one rank: this rank's own report).
struct WindowFlags {
  bool replicas_written = false;
  bool buffer_writes_agree = true;  // every rank wrote the same synced buffers since the sync
  bool layouts_agree = true;        // every rank reduced the same layout
  bool fetches_agree = true;        // every rank fetched the same modules in the same order
};

/// Compares a hash of this rank's reduce layout (GradReducer::layout()) with every other
/// rank's, and returns each flag set on any rank.
/// `written_buffers`: per synced buffer, 1 when this rank wrote it since the last sync.
WindowFlags agree_on_window(const std::string& layout, uint64_t fetches_hash, bool replicas_written,
                            const std::vector<uint8_t>& written_buffers, comm::Communicator& comm);
/// When agree_on_window found the ranks wrote different buffers, every rank calls this: it
/// throws comm::AgreedError naming the first buffer some ranks wrote and others did not
/// (`names` in the order of `written`), and which ranks wrote it. `model` (the engine's model
/// type) says whose buffer it is where two engines train side by side.
[[noreturn]] void fail_buffer_writes_differ(const std::vector<std::string>& names,
                                            const std::vector<uint8_t>& written,
                                            const std::string& model, comm::Communicator& comm);
/// When agree_on_window found the layouts differ, every rank calls this: it throws
/// comm::AgreedError naming the first parameter that got a gradient on some ranks only (or,
/// when the sets agree, the ranks' orders), and the engine's model type (`model`).
[[noreturn]] void fail_layouts_differ(const std::string& layout, const std::string& model,
                                      comm::Communicator& comm);

}  // namespace zt::zero
