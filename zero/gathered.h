// GatheredParameters: a scope in which partitioned parameters are whole on every rank.
//
//   { zero::GatheredParameters g(*model, comm, /*modifier_rank=*/0);
//     if (comm.rank() == 0) init_weights(*model); }   // rank 0's edit reaches every rank
//
// With a modifier rank, that rank's parameter AND buffer values are broadcast on exit
// and re-partitioned into every rank's shard (in mixed precision the fp32 masters take
// the edited elements; the others keep their fp32 values). Without one the scope is
// read-only: a change is detected on exit and raised, never silently discarded, and the
// model is left as it was before the scope at any rank count (what the scope did not
// gather itself, or gathers as the shard itself at one rank, is copied at entry for that).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "zero/comm/communicator.h"

namespace zt::zero {

class GatheredParameters {
 public:
  /// Gathers `params` (partitioned or replicated) and covers `buffers`; a tensor named
  /// more than once counts once.
  GatheredParameters(std::vector<Tensor> params, comm::Communicator& comm,
                     std::optional<int> modifier_rank = std::nullopt,
                     std::vector<Tensor> buffers = {});
  /// Every parameter and buffer of `m`.
  GatheredParameters(nn::Module& m, comm::Communicator& comm,
                     std::optional<int> modifier_rank = std::nullopt);
  /// Closes the scope (see exit()) and never throws (a scope may live in a std::optional or
  /// a std::unique_ptr, whose destructors must not). An exit that fails here is kept, unless
  /// an exception thrown inside the scope is unwinding it (that one is the error to report):
  /// the next scope opened, engine forward or engine step on this thread throws it with the
  /// exit's own message (raise_failed_exit()), and a thread that ends first prints it.
  ~GatheredParameters();
  GatheredParameters(const GatheredParameters&) = delete;
  GatheredParameters& operator=(const GatheredParameters&) = delete;

  /// Broadcasts and re-partitions (modifier rank) or checks for changes (none), then
  /// releases what this scope gathered, also when it throws. Idempotent. Call it to have a
  /// failure thrown at the scope's end.
  void exit();
  /// Throws, once, the error of an exit that a scope's destructor met on this thread (the
  /// first one, if several). The engine calls it before a forward and a step.
  static void raise_failed_exit();
  /// After an optimizer step (and its buffer sync) on this thread: the read-only scopes
  /// open here take the new values as their own, so that a scope held across a step
  /// does not blame the step's update on the user. The engine calls it.
  static void note_step();
  /// After a load wrote `tensors` wherever they live (shards and gathered copies alike:
  /// zero::load_state_dict, load_checkpoint): the read-only scopes open on this thread take
  /// their new values as their own, since a load is not an edit that their exit would lose.
  static void note_loaded(const std::vector<Tensor>& tensors);
  /// Before an optimizer step or an engine's construction on this thread (the engine calls
  /// it before it changes anything; `when` says which, for the error): throws if a read-only
  /// scope open here holds an edit of a parameter, naming it. Both gather the partitioned
  /// parameters' copies again from the shards, a construction broadcasts rank 0's replicas,
  /// and a step updates the replicas and note_step() takes every value as the scope's, so the
  /// edit would otherwise vanish, or stay, without the error its exit gives. (Buffers are not
  /// checked: a training forward writes running statistics.)
  static void check_unedited(const char* when);
  /// Before an optimizer step (or an engine's construction, a checkpoint's save or a
  /// consolidated export) on this thread: the modifier scopes open here broadcast and
  /// re-partition the edits made so far (as exit() does), so that the step updates the edited
  /// values and its re-gather does not overwrite them, and a checkpoint holds them. The engine
  /// and the checkpoints call it; every rank of each scope's communicator must be in the call.
  static void commit_edits();

 private:
  void hash_contents();
  /// Records tensor `k` (`t`, of params_ then buffers_) as it is now: its hash, and a copy
  /// where an edit of it would outlive the scope.
  void remember(size_t k, const Tensor& t);
  /// Puts back the recorded values of the tensors edited since.
  void undo_edits();
  /// The name of the first tensor whose contents changed since hash_contents() ("" if none),
  /// among the parameters only with `params_only`.
  std::string first_edit(bool params_only = false) const;
  void broadcast_edits();
  static constexpr int64_t kBatchElems = int64_t{8} << 20;  // elements per all-gather
  std::vector<Tensor> params_, buffers_;
  std::vector<bool> gathered_here_;
  comm::Communicator& comm_;
  std::optional<int> modifier_;
  std::vector<uint64_t> hashes_;
  std::vector<Tensor> saved_;  // per remember(); undefined where the scope's copy is released
  int unwinding_at_open_;      // std::uncaught_exceptions() when the scope opened
  bool open_ = true;
};

/// Runs `init(name, module)` on every module of `root` (pre-order, named as
/// named_modules() names them), each inside a GatheredParameters scope over that module's
/// own parameters and buffers with modifier rank 0: custom initialization of a model that
/// was partitioned at registration (zero::Init), holding one module's parameters whole at
/// a time, never the whole model. Every rank runs `init`, so the ranks' random generators
/// stay in step; rank 0's values are the ones every rank keeps. Plain (never partitioned)
/// tensors are initialized in place and broadcast from rank 0 like the others.
void apply_gathered(nn::Module& root, comm::Communicator& comm,
                    const std::function<void(const std::string& name, nn::Module& m)>& init);

}  // namespace zt::zero
