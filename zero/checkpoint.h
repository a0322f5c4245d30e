// Sharded ZeRO-3 checkpoints (docs/DESIGN.md, "Checkpoints"). A checkpoint is a directory
//
//   <root>/<tag>/rank_00000.safetensors ...  each rank's parameter shards, fp32 master
//                                            shards, optimizer-state shards and its own
//                                            buffers under buffers.sync none
//   <root>/<tag>/replicated.safetensors      replicated parameters, the persistent buffers
//                                            (not a non-persistent one, rebuilt with the
//                                            model), the optimizer state of trainable
//                                            replicas (rank 0)
//   <root>/<tag>/meta.json                   world size, step, config, per-parameter shape
//                                            and partition layout, loader position, digests
//   <root>/latest                            the tag of the newest checkpoint
//
// A save writes <root>/.<tag>.tmp-<id> and renames it once every rank has finished, so a
// checkpoint is visible only when complete and a failed save leaves older ones untouched.
// A load validates everything on every rank before it changes anything in the engine;
// at a different world size each rank re-slices its new shards out of the old rank files.
// export_consolidated writes one safetensors file with the model's own key names.
//
// Shard keys: "param/<name>" [shard_numel] in the parameter's dtype, "master/<name>" fp32
// [shard_numel] (only where the engine keeps a master apart), "optim/<name>.<slot>" and
// "optim/<name>.step" (the optimizer's state_dict keys), "buffer/<name>" (the rank's own,
// under buffers.sync none: a load at the same world size restores each rank's, at another
// one rank 0's); replicated file: "param/<name>", "buffer/<name>" (rank 0's, every buffer),
// "optim/<name>.<slot>".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "zero/engine.h"

namespace zt::zero {

/// The deepest nesting meta.json may have (a save writes 3 levels): a deeper one is damaged
/// and refused before it is parsed, as every reader of it does.
inline constexpr int kMaxMetaDepth = 8;

/// What a checkpoint carries besides model and optimizer state.
struct CheckpointExtra {
  /// Training step (the app's count: fp16 steps skipped for an overflow included).
  /// save: -1 records engine.global_step(); load: the step that was saved. The engine's
  /// own applied and skipped counts are saved and restored beside it.
  int64_t step = -1;
  /// The run's configuration (YAML text, e.g. config::Node::dump()); recorded, returned.
  std::string config_yaml;
  /// Data loader position (data::LoaderState{epoch, position}), the per-rank batch size it
  /// counts in and the data set's size, whose shuffle it is a position in (each 0: not
  /// recorded, as in checkpoints saved before they were).
  int64_t loader_epoch = 0, loader_position = 0, loader_batch = 0, loader_dataset_size = 0;
  /// Free-form strings (run name, RNG seeds, ...).
  std::map<std::string, std::string> user;
  /// The application's own training state (counters, RNG state, an EMA, ...): rank 0's
  /// tensors are saved (as "state/<name>" in replicated.safetensors, covered by its
  /// digest) and load returns them on every rank. State that differs between ranks must be
  /// made rank-independent first (e.g. summed over ranks), so a resume at another world
  /// size reads it too.
  std::vector<std::pair<std::string, Tensor>> state;
  /// Set by load_checkpoint: the directory read and the world size it was saved at.
  std::string dir;
  int saved_world_size = 0;
};

/// "step_000100": the conventional tag for a step (wider numbers just grow).
std::string checkpoint_tag(int64_t step);

/// Saves a checkpoint to <root_dir>/<tag> and points <root_dir>/latest at it. Every rank
/// must call it, at a step boundary (not between gradient-accumulation micro-steps), and
/// not after an optimizer step that failed part-way (Optimizer::consistent()). A tag
/// shaped like checkpoint_tag(step) must name the step the checkpoint records. An
/// existing <root_dir>/<tag> is replaced only after the new one is complete; one that is
/// not complete is kept, renamed <tag>.incomplete-<id>. keep_last > 0 then deletes older
/// checkpoints under root_dir: the new one and the keep_last - 1 complete others with the
/// highest steps stay. Only folders named checkpoint_tag(step) are counted or deleted, and
/// only complete ones (every file there and whole), never one of a later step. Any failure
/// on any rank throws comm::AgreedError on every rank and removes the temporary directory.
/// The edits of an open GatheredParameters modifier scope are put on every rank first, as a
/// step does (GatheredParameters::commit_edits), and an open read-only scope's edit of a
/// parameter is refused, as a step refuses it. Returns the checkpoint directory.
std::string save_checkpoint(Engine& engine, const std::string& root_dir, const std::string& tag,
                            const CheckpointExtra& extra = {}, int64_t keep_last = 0);

/// The checkpoint directory `dir_or_root` names: itself if it holds meta.json, else the
/// tag its `latest` file names; when `latest` is missing, garbage, names a folder that is
/// gone, or names an older step than a newer complete step folder (a save killed before it
/// updated `latest`), the newest complete checkpoint (find_resume_point), and *note says
/// why. Throws if there is none.
std::string find_checkpoint(const std::string& dir_or_root, std::string* note = nullptr);

/// True if `dir_or_root` holds a checkpoint (directly or through `latest`).
bool has_checkpoint(const std::string& dir_or_root);

/// Checks that meta.json of checkpoint `dir` reads and agrees with its world size (one
/// rank file per rank, each partitioned tensor's shard size), and that every file it lists
/// exists and matches the digest recorded at save. Throws naming the first problem.
void verify_checkpoint(const std::string& dir);

/// Where a resume starts (find_resume_point).
struct ResumePoint {
  std::string dir;   ///< the newest complete checkpoint; "" when root holds nothing saved
  int64_t step = 0;  ///< its step
  /// Why it is not simply the one `latest` names ("" when it is), for the user.
  std::string note;
  /// The newer step folders passed over (incomplete or damaged), newest first.
  std::vector<std::string> passed_over;
};

/// The newest complete checkpoint under `root`: among the step folders (named
/// checkpoint_tag(step); other folders are not looked at), the highest step whose meta.json
/// reads, records that step and agrees with its world size, and whose files match their
/// digests. `latest` is only a hint: when it is missing, garbage, or names a missing, older
/// or incomplete checkpoint, the note says so, and it names the newer folders passed over
/// and why. Returns an empty dir when root is missing or holds no step folder and no
/// `latest`; throws, listing each folder's problem, when it holds some but none is
/// complete, and when root is a file.
ResumePoint find_resume_point(const std::string& root);

/// A run that resumes from rp sets the folders it passed over aside, each renamed to
/// "<tag>.incomplete-<id>" (kept for whoever can mend it): a damaged checkpoint newer than
/// the one resumed from must not count among those a later save keeps (a prune counts
/// whole folders without reading their digests), nor be looked at by every later resume.
/// Returns their new paths.
std::vector<std::string> set_aside_passed_over(const ResumePoint& rp, const std::string& id);

/// True when `root` holds anything a save leaves: a `latest` file or a (non-hidden) folder.
bool holds_checkpoints(const std::string& root);

/// Removes what interrupted saves and prunes left under `root` (".<tag>.tmp-<id>" and
/// ".<tag>.del-<id>" folders, ".latest.tmp-<id>" files) when the process named in <id> is
/// gone from this machine, or has this process's pid but is not this process (a restarted
/// container's app runs under the same pid); a ".<tag>.old-<id>" folder whose <tag> is
/// missing is renamed back. Temporaries of live processes, of other machines and of this
/// process are kept, unless `run_lock_held`: the caller holds the RunLock of the run that
/// saves here, so every temporary but this process's is an earlier run's (another
/// machine's included: a rescheduled job's) and goes. That trusts the lock across
/// machines, as the lock itself does (a file system whose flock is per machine, NFSv3
/// mounted nolock, keeps neither two jobs apart nor their temporaries). Returns what it
/// removed.
/// save_checkpoint calls it (rank 0) before each save; an app's run start, under its lock.
std::vector<std::string> remove_stale_temporaries(const std::string& root,
                                                  bool run_lock_held = false);

/// Marks `dir` (created if missing) as written by this process while it lives: a kernel
/// lock (flock) on `dir`/.lock, whose text names the process, its machine and when it
/// started. A second RunLock on `dir` fails, naming the holder, while the first is held,
/// so two jobs never interleave their checkpoints and metrics in one folder; the lock goes
/// with its process, however that ends (on NFS, once the server's lease expires).
class RunLock {
 public:
  explicit RunLock(const std::string& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  /// What the lock file's first line holds while this lock is held (unique per lock).
  const std::string& id() const { return id_; }

 private:
  std::string path_, id_;
  int fd_ = -1;
};

/// Restores parameters (shards and fp32 masters), optimizer state (the learning rate last
/// set included), replicated parameters, buffers and the global step from a checkpoint saved at any
/// world size, then refreshes gathered copies and verifies replicas. Every rank must call it. The
/// model must have the same parameter names, shapes, dtypes and kinds (partitioned/replicated) and
/// the same buffers; the optimizer the same kind (Optimizer::kind(), where the checkpoint
/// records it). A parameter frozen at save and trainable now starts its optimizer state afresh;
/// one trainable at save and frozen now leaves its saved state unread (a freezing schedule's
/// resume; a note names them). Rank 0 resolves dir_or_root (find_checkpoint) and every rank reads
/// the folder it names, so the ranks cannot load different steps (a `latest` rewritten in between);
/// ranks that find different checkpoints at that path (a relative path from another working folder,
/// a copy on each machine: their meta.json differ) stop with an error naming the rank. Any problem
/// (missing or corrupt file, different model, another optimizer) throws comm::AgreedError on every
/// rank and leaves the engine unchanged. A dynamic fp16 loss scale goes on from the saved one; a
/// fixed loss_scale in the config wins (a note says so when the saved scale was dynamic). Buffers
/// under buffers.sync none are each rank's own at the saved world size, rank 0's at another (a note
/// says so). Returns the extra data. With optimizer_state false the optimizer state is neither read
/// nor checked, and the optimizer is left as it is (inference and export, whose engine's optimizer
/// need not be the one the checkpoint was trained with).
CheckpointExtra load_checkpoint(Engine& engine, const std::string& dir_or_root,
                                bool optimizer_state = true);

/// Writes the whole model to one safetensors file at `path` with its state_dict() key
/// names: floating parameters in fp32 (from the fp32 masters; other parameters in their own
/// dtype), persistent buffers (floating ones in fp32), loadable into a plain model with
/// nn::load_state_dict. Every rank must call it (shards are all-gathered); rank 0 writes,
/// atomically. A failure throws comm::AgreedError on every rank.
void export_consolidated(Engine& engine, const std::string& path);

/// What export_consolidated writes, in memory: on rank 0 the model's state_dict() names
/// with the floating parameters' fp32 values (from the fp32 masters, not their 16-bit
/// storage), the other parameters' own values, and
/// the buffers (floating ones in fp32), on host memory; empty on the other ranks. Every
/// rank must call it (shards are all-gathered). An open modifier scope's edits are put on
/// every rank first, and an open read-only scope's edit of a parameter is refused, as
/// save_checkpoint does.
NamedTensors consolidated_state(Engine& engine);

/// The safetensors metadata export_consolidated writes: format "pt" (PyTorch tensors, which
/// transformers' from_pretrained requires) and the step.
std::map<std::string, std::string> export_metadata(const Engine& engine);

}  // namespace zt::zero
