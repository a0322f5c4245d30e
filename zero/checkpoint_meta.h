// What save and load share (internal to zero/): the model description and file digests
// that meta.json records, and the error exchange that lets all ranks fail together.
#pragma once

#include <string>

#include "zero/checkpoint_dir.h"
#include "zero/engine.h"
#include "zero/replicas.h"

namespace zt::zero::ckpt {

/// Every rank learns every rank's error ("" = fine) and all throw comm::AgreedError if any
/// failed (the same text on every rank, so launch() ends an mpirun job without aborting
/// it). The error text already says where it was raised, so no second location is added.
void agree(comm::Communicator& comm, const std::string& what, const std::string& mine);

/// Order-independent digest of named tensors (dtype, shape, bytes): catches corrupted data
/// that still parses, and a rank file swapped in from another checkpoint.
uint64_t digest(NamedTensors tensors);

/// A host tensor with the same values (no copy on CPU: it is written out at once).
Tensor host(const Tensor& t);

/// The parameter keeps an fp32 master shard apart from its (low-precision) shard.
bool separate_master(const Engine::NamedParam& mp);

/// "<param>.<slot>" -> "<param>" (slot names never contain a dot).
std::string state_owner(const std::string& key);

/// meta.json "tensors": one entry per partitioned parameter (with its partition layout),
/// replicated parameter and buffer, in that order; what must match between save and load.
json describe(Engine& e);

/// Checks that meta.json `meta` (read from `meta_path`) is consistent with its world size:
/// `files` lists replicated.safetensors and one file per rank, no more, and each
/// partitioned tensor's shard_numel is its share over world_size ranks. Throws naming the
/// first disagreement. A load checks it before reading a shard, and verify_checkpoint too.
void check_layout(const json& meta, const std::string& meta_path);

/// The first difference between the saved model and this one (by name, kind, dtype and
/// shape), or "".
std::string first_difference(const json& saved, const json& mine);

}  // namespace zt::zero::ckpt
