// Synchronized BatchNorm: every BatchNorm layer of a module normalizes with statistics
// over ALL ranks' batches, so N-rank training equals single-process training on the
// global batch (outputs, gradients and running statistics).
#pragma once

#include <memory>
#include <vector>

#include "nn/module.h"
#include "nn/norm.h"
#include "zero/comm/communicator.h"

namespace zt::zero {

/// Installs an all-reduce stats reducer on every nn::BatchNorm in `m`. The reducer is an
/// autograd function: forward sums (sum, sum_sq, count) over ranks (sum and sum_sq
/// all-reduced on their device, the counts gathered from the hosts: nothing is read back);
/// backward sums the gradients of sum and sum_sq over ranks, because every rank's loss
/// depends on every rank's local sums. On one rank the reducer returns the local
/// statistics as they are.
/// Returns the layers changed: the reducer holds `comm` by address, so whoever installs it
/// resets their stats_reducer before `comm` goes (as ~Engine does).
std::vector<std::shared_ptr<nn::BatchNorm>> enable_sync_batchnorm(nn::Module& m,
                                                                  comm::Communicator& comm);

}  // namespace zt::zero
