// Each rank's default random generator, which dropout draws from: seeded per rank, saved in
// a checkpoint and restored on resume (apps/common/rng_state.cpp).
#pragma once

#include <string>

#include "configs/app_config.h"
#include "core/tensor.h"
#include "zero/comm/communicator.h"

namespace zt::app {

/// Seeds this rank's default generator, which dropout draws from, with a stream of its own
/// derived from train.seed: dropout masks differ per rank, as each rank's data does. Call
/// after building the model (whose initialization is seeded alike on every rank).
void seed_dropout(const config::TrainConfig& train, const comm::Communicator& comm);

/// Every rank's default random generator state (seed, offset), as an i64 tensor
/// [world, 2] on every rank. Every rank must call it.
Tensor gather_rng_state(comm::Communicator& comm);
/// Sets this rank's default generator to its row of `state` (from gather_rng_state) when
/// `state` has one row per rank, and returns "". A `state` of another world size's ranks
/// (a resume at another world size) cannot be split over these: each rank then starts a
/// new stream, derived from the saved generators and `step` (the step resumed, so that the
/// run draws none of the masks its first steps drew), and the return says so, for a note.
/// An undefined `state` (a checkpoint saved without it) changes nothing and returns "".
std::string restore_rng_state(const Tensor& state, const comm::Communicator& comm, int64_t step);

}  // namespace zt::app
