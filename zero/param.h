// The state ZeRO-3 keeps for each managed parameter, attached to the parameter's tensor
// (TensorImpl::extra). A partitioned parameter keeps its full shape and name, but its
// storage is present only while gathered; each rank owns a flat padded shard.
//
//   NOT_AVAILABLE --issue_gather--> INFLIGHT --wait_gather--> AVAILABLE --release--> ...
//
// A replicated parameter (zero::Replicated) is a full copy on every rank and never
// changes status.
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"
#include "zero/comm/communicator.h"
#include "zero/partition.h"

namespace zt::zero {

enum class ParamStatus : uint8_t { kNotAvailable, kInflight, kAvailable };
enum class ParamKind : uint8_t { kPartitioned, kReplicated };
const char* status_name(ParamStatus s);

struct ZeroParam : TensorExtra {
  ParamKind kind = ParamKind::kPartitioned;
  Partition part;
  int rank = 0;              // this rank (which slice `shard` is)
  Shape shape;               // full shape
  DType dtype = DType::f32;  // full parameter dtype (shards use it too)
  Device device;
  Tensor shard;   // [shard_numel] this rank's slice, padded with zeros
  Tensor master;  // fp32 master shard when the engine keeps one apart
  ParamStatus status = ParamStatus::kNotAvailable;
  Tensor gathered;                   // [padded_numel] while INFLIGHT / AVAILABLE
  std::shared_ptr<comm::Work> work;  // the in-flight all-gather
  bool persistent = false;           // numel <= stage3_param_persistence_threshold
  int holds = 0;                     // GatheredParameters scopes keeping it gathered
};

/// The ZeRO state of a parameter, or null for a plain tensor.
ZeroParam* zero_param(const Tensor& p);
bool is_partitioned(const Tensor& p);
bool is_replicated(const Tensor& p);

/// Partitions a full parameter in place: rank `src`'s value is scattered, each rank keeps
/// its shard, the full storage is released (status NOT_AVAILABLE).
void partition_param(const Tensor& p, comm::Communicator& comm, int src = 0);
/// Makes `p` a replica: broadcast from `src`, marked replicated (gathers first if it was
/// partitioned).
void replicate_param(const Tensor& p, comm::Communicator& comm, int src = 0);
/// Broadcasts a buffer (or any full tensor) from `src` in place.
void broadcast_tensor(const Tensor& t, comm::Communicator& comm, int src = 0);

/// Starts an async all-gather of a NOT_AVAILABLE parameter (no-op otherwise).
void issue_gather(const Tensor& p, comm::Communicator& comm);
/// Makes the parameter AVAILABLE (issues the gather if needed, waits if in flight).
void wait_gather(const Tensor& p, comm::Communicator& comm);
/// Frees the gathered storage (NOT_AVAILABLE); waits first if a gather is in flight.
void release_param(const Tensor& p);
/// After the full value of an AVAILABLE parameter changed (identically on every rank),
/// copies this rank's slice back into its shard.
void write_back_shard(const Tensor& p);

}  // namespace zt::zero
