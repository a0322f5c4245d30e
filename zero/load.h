// Loading full state dicts into a (partly) partitioned model, with one rule for every
// rank: ONLY rank `src`'s values count. Partitioned parameters take their slice of rank
// src's tensor (scattered); replicated parameters, plain parameters and every buffer are
// broadcast from rank src. So a loader that filled only rank 0 — the classic bug that
// leaves BatchNorm statistics different on every rank — still gives identical replicas.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "zero/comm/communicator.h"

namespace zt::zero {

/// Loads `state` (read on rank `src` only; other ranks may pass anything, e.g. {}) into
/// `m`. With `strict`, rank src checks keys and shapes like nn::load_state_dict and every
/// rank throws the same comm::AgreedError. Ends with a replica check of buffers and replicas.
void load_state_dict(nn::Module& m, const std::vector<std::pair<std::string, Tensor>>& state,
                     comm::Communicator& comm, bool strict = true, int src = 0);

}  // namespace zt::zero
