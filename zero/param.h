// The one record ZeRO-3 keeps for each managed parameter, attached to the parameter's
// tensor (TensorImpl::extra). A partitioned parameter keeps its full shape and name, but
// its storage is present only while gathered; each rank owns a flat padded shard.
//
//   NOT_AVAILABLE --gather--> INFLIGHT --wait--> AVAILABLE --release--> NOT_AVAILABLE
//
// Everything about the parameter lives here: its shard (in the storage dtype), the fp32
// master shard the optimizer updates when the storage is low precision, the fp32
// gradient shard reduce-scatter writes into (copied for the window's first gradient,
// added after), and its gather status. A replicated parameter (zero::Replicated) is a
// full copy on every rank and never changes status.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "zero/comm/communicator.h"
#include "zero/partition.h"

namespace zt::zero {

enum class ParamStatus : uint8_t { kNotAvailable, kInflight, kAvailable };
enum class ParamKind : uint8_t { kPartitioned, kReplicated };

struct GroupGather;

/// Elements a gradient shard of `shard_numel` occupies in the engine's flat gradient
/// buffer: rounded up to 16 (64 bytes), where each shard starts.
inline int64_t grad_shard_slot(int64_t shard_numel) {
  return (shard_numel + 15) / 16 * 16;
}

struct ZeroParam : TensorExtra {
  ParamKind kind = ParamKind::kPartitioned;
  Partition part;
  int rank = 0;                 // this rank (which slice `shard` is)
  Shape shape;                  // full shape
  DType dtype = DType::f32;     // storage dtype: the parameter's, its shard's, its gathers'
  DType declared = DType::f32;  // the parameter's own dtype when partitioned: what an engine's
                                // precision config starts from (dtype is an engine's choice)
  Device device;
  Tensor shard;       // [shard_numel] this rank's slice, padded with zeros
  Tensor master;      // fp32 [shard_numel] kept apart when dtype is not f32 or the optimizer
                      // is offloaded (then in host memory, zero/offload.h); else undefined
  Tensor grad_shard;  // fp32 [shard_numel] while an engine trains it (else undefined)
  bool grad_written = false;  // grad_shard holds gradient of this window; false: its values
                              // are stale, and the next gradient is copied in, not added
  ParamStatus status = ParamStatus::kNotAvailable;
  Tensor gathered;                      // full storage while AVAILABLE
  std::shared_ptr<GroupGather> flight;  // the all-gather while INFLIGHT
  bool persistent = false;              // numel <= stage3_param_persistence_threshold
  int holds = 0;                        // GatheredParameters scopes keeping it gathered
  bool scope_gathered = false;          // a scope gathered it: the last one holding it (in
                                        // whatever order they close) releases it
  TensorImpl* owner = nullptr;          // the parameter's tensor (which owns this record)
  /// Gathered copies released since the engine last looked (Engine's step): one still alive
  /// then is held by a tensor made from the parameter (a view or detach() kept past the
  /// call that gathered it), which keeps the values from before the step.
  std::vector<std::weak_ptr<Storage>> released_copies;

  ~ZeroParam() override;
  /// A partitioned parameter's dtype and device are its shards', which Module::to cannot
  /// reach: refused, saying what to do instead.
  std::string conversion_refused() const override;
  std::string optimizer_refused() const override;

  /// Starts an async all-gather if NOT_AVAILABLE (no-op otherwise).
  void gather(comm::Communicator& comm);
  /// Waits for the in-flight all-gather: the parameter is AVAILABLE after (no-op if it
  /// already is; an error if it was never gathered).
  void wait();
  /// Frees the gathered storage (NOT_AVAILABLE); waits first if a gather is in flight.
  /// A copy apart from the shard is remembered in released_copies.
  void release();
  /// Whether a gathered copy released since the last call is still held elsewhere; forgets
  /// them.
  bool stale_copy_held();
  /// Gathered, not persistent and held by no scope: release() may take it.
  bool releasable() const {
    return status != ParamStatus::kNotAvailable && !persistent && holds == 0;
  }
  /// Copies this rank's slice of `full` (the parameter's full value, any shape with numel
  /// elements, identical on every rank) into the shard and the master shard.
  void write_shard(const Tensor& full);
  /// write_shard for an edit of the gathered low-precision value: the master keeps its
  /// fp32 value where the edit left the stored value as it was, so an edit of a few
  /// elements does not round the others' masters to the storage precision.
  void write_edit(const Tensor& full);
  /// Stores the parameter in `storage` from now on: the shard is converted, the old
  /// (fp32) values become the master shard if `keep_master`, and the tensor's dtype
  /// changes with it. A gathered copy is released; none may be held by a scope.
  void set_storage_dtype(DType storage, bool keep_master);
  /// The fp32 shard the optimizer updates: the master, or the shard itself for f32.
  const Tensor& fp32_shard() const { return master.defined() ? master : shard; }
  /// After the optimizer updated the master shard: rounds it into the storage shard.
  void shard_from_master();
};

/// One all-gather for several parameters (a module's, as FSDP2 groups them), in flight.
///
/// Each rank sends its shards side by side, S = sum of the members' shard_numel, and the
/// collective lays the ranks' pieces one after another:
///
///   flat = [ rank 0: p0 slice 0 | p1 slice 0 | ... ][ rank 1: p0 slice 1 | p1 slice 1 | ... ]
///          ^ 0                                      ^ S
///
/// so member k's slice from rank r starts at r * S + offset[k], offset[k] being the sum
/// of the shard_numel of the members before it. A parameter's full value is its slices
/// in rank order, so finish() copies each member out into its own storage (the member's
/// first numel elements; the zero padding stays behind) and frees the flat buffer. With a
/// single member, the flat buffer IS its padded full value and nothing is copied.
struct GroupGather {
  std::vector<ZeroParam*> members;  // null where a member was destroyed in flight
  std::vector<int64_t> offsets;     // of each member's slice within a rank's piece
  int64_t piece = 0;                // S: elements each rank contributes
  Tensor send;                      // [S] this rank's shards (the shard itself for one member)
  Tensor flat;                      // [world * S]
  std::shared_ptr<comm::Work> work;
  bool done = false;

  /// Waits for the collective and makes every member AVAILABLE. Idempotent.
  void finish();
  /// Waits for the collective (its error, if any, ignored) and drops what it brought:
  /// every member is NOT_AVAILABLE again, and no work on the communicator is left. For
  /// an owner that goes away with gathers in flight (~Engine), before its communicator.
  void drop() noexcept;
};

/// Starts the all-gathers of the NOT_AVAILABLE partitioned parameters of `group`, one per
/// (dtype, device) among them; the others are left alone. Returns the elements (padded) it
/// gathers, 0 if none needed it. With `blocking` the caller is about to wait: the
/// collective may then run on the caller's thread (no hand-off to the comm thread).
int64_t gather_group(const std::vector<ZeroParam*>& group, comm::Communicator& comm,
                     bool blocking = false);

/// The ZeRO state of a parameter, or null for a plain tensor.
ZeroParam* zero_param(const Tensor& p);
bool is_partitioned(const Tensor& p);
bool is_replicated(const Tensor& p);

/// Partitions a full parameter in place: rank `src`'s value is scattered, each rank keeps
/// its shard, the full storage is released (status NOT_AVAILABLE). With a `storage` dtype
/// other than the parameter's, the shard is stored in it (the original values kept as
/// the fp32 master shard if the parameter requires grad).
void partition_param(const Tensor& p, comm::Communicator& comm, int src = 0);
/// The same with the shard made on `device` from `p` wherever it lies (a host parameter's
/// values are copied there by `src` alone; no other rank touches them). `p` then reports
/// `device`.
void partition_param(const Tensor& p, comm::Communicator& comm, int src, Device device);
void partition_param(const Tensor& p, comm::Communicator& comm, int src, DType storage);
/// The dtype an engine of mixed precision `low` (f32: none) stores parameter p in: `low`
/// for a parameter declared f32 (its own dtype when partitioned, whatever an earlier
/// engine stored it in), else its own dtype.
DType engine_storage_dtype(const Tensor& p, DType low);
/// Makes `p` a replica: broadcast from `src`, marked replicated (gathers first if it was
/// partitioned).
void replicate_param(const Tensor& p, comm::Communicator& comm, int src = 0);
/// Broadcasts a buffer (or any full tensor) from `src` in place: a write on every rank
/// (its version moves there, as an in-place op's does).
void broadcast_tensor(const Tensor& t, comm::Communicator& comm, int src = 0);

}  // namespace zt::zero
