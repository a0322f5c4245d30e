// What every rank must agree on before an update, settled in one small exchange per step
// (none with one rank):
// - the gradient layout. Each rank's reducer reduce-scatters the parameters that got a
//   gradient on that rank, in the order they got it. A parameter that got one on some
//   ranks only (a branch that some ranks' losses skip) shifts the buckets against the
//   other ranks'; where the buckets happen to have equal sizes the collective pairs
//   different parameters' slices and raises nothing. Here it is an error before the update.
// - whether a replicated parameter was written outside the engine since the last check (a
//   load on rank 0 only, after the engine was built): then the replicas are verified
//   after the step.
#pragma once

#include <string>

#include "zero/comm/communicator.h"

namespace zt::zero {

/// Compares this rank's reduce layout (GradReducer::layout()) with every other rank's and
/// tells whether any rank set `replicas_written`. Throws comm::AgreedError on every rank
/// when the layouts differ, naming the first parameter that got a gradient on some ranks
/// only (or, when the sets agree, the ranks' orders).
bool agree_on_window(const std::string& layout, bool replicas_written, comm::Communicator& comm);

}  // namespace zt::zero
