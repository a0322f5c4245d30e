// The shared-memory rendezvous behind ThreadComm. For each sequence number every rank
// posts its buffers, waits until all ranks posted (checking that they agree on the
// collective), works directly on the other ranks' buffers, and leaves; a rank's buffers
// stay valid until every rank has left. Every wait has a deadline and wakes on abort.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"

namespace zt::comm {

/// One rank's part of a collective.
struct Post {
  std::string signature;  // kind, dtype, sizes, op, root: must match across ranks
  const void* in = nullptr;
  void* out = nullptr;
  void* scratch = nullptr;             // all_reduce: this rank's reduced chunk
  const std::string* bytes = nullptr;  // all_gather_bytes
  // Small messages: a private copy of `in` (then `in` points into it), so this rank may
  // reuse its buffer at once and nobody waits for the others to finish reading.
  std::shared_ptr<const std::vector<char>> eager;
};

/// The memory a post's `in`, `scratch` and `bytes` point into (none for an eager post). The
/// group holds it until its rank leaves the collective normally: a rank that leaves a
/// failing collective by throwing (abort, timeout) frees nothing a peer is still reading.
struct Held {
  std::vector<Tensor> tensors;
  std::shared_ptr<const std::string> bytes;
};

/// When a wait gives up: the deadline, and the timeout it was set from (for the message).
struct WaitLimit {
  Deadline at;
  std::chrono::milliseconds timeout;
};

/// The ranks of one run_threads call.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size);
  int size() const { return size_; }

  /// Posts rank's part of collective `seq` (and what keeps its memory alive) and waits
  /// until every rank posted. Returns all posts, indexed by rank. `what` names the
  /// collective in errors (timeout, mismatch, abort, a rank that exited without calling it).
  std::vector<Post> arrive(int rank, int64_t seq, const Post& post, Held held, WaitLimit limit,
                           const std::string& what);
  /// Waits until every rank reached `phase` (0 or 1) of collective `seq`.
  void sync(int rank, int64_t seq, int phase, WaitLimit limit, const std::string& what);
  /// Waits until every rank is done with `seq`, after which its buffers may be reused.
  void leave(int rank, int64_t seq, WaitLimit limit, const std::string& what);
  /// Leaves `seq` without waiting: for collectives whose posts own their data (Post::eager).
  /// The slot (and the copies) go when the last rank departs.
  void depart(int64_t seq);

  /// Fails every current and later wait with "aborted because <reason>" (first wins).
  void abort(const std::string& reason);
  std::string abort_reason() const;
  /// A rank that returned: waiting for it is an error, not a hang.
  void mark_exited(int rank);
  /// An error no rank saw (Executor::finish()): kept, first wins, for run_threads.
  void note_unseen(const std::string& error);
  std::string unseen() const;

 private:
  static constexpr int kLeavePhase = 2;
  struct Slot {
    std::vector<Post> posts;
    std::vector<Held> held;  // dropped by each rank as it leaves normally
    std::vector<bool> arrived;
    int n_arrived = 0;
    int phase_count[3] = {0, 0, 0};
    std::vector<bool> phase_seen[3];
    int released = 0;
  };
  Slot& slot(int64_t seq);
  // Waits until ready() under lock_; names `missing()` ranks on timeout or exit.
  // A missing rank that already posted a later collective skipped this one (it failed on
  // its own during it): that fails the wait at once.
  template <typename Ready, typename Missing>
  void wait_for(std::unique_lock<std::mutex>& lock, int64_t seq, Ready ready, Missing missing,
                WaitLimit limit, const std::string& what, const char* doing);
  void abort_locked(const std::string& reason);
  // Wakes every waiter (spinning or blocked); called with mu_ held.
  void notify_locked();
  [[noreturn]] void throw_aborted(const std::string& what) const;

  const int size_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> epoch_{0};  // bumped (under mu_) at every change a waiter awaits
  std::map<int64_t, Slot> slots_;
  std::vector<bool> exited_;
  std::vector<int64_t> last_seq_;  // last sequence number each rank posted (-1: none)
  std::string abort_reason_;
  std::string unseen_;
};

}  // namespace zt::comm
