// The communicator interface (namespace zt::comm): rank, size and the collectives
// ZeRO-3 needs on flat tensors, each blocking or async, with per-kind counters and a
// deadline on every collective. Backends: ThreadComm (thread ranks sharing memory),
// MpiComm (one process per rank, CPU tensors), NcclComm (CUDA tensors). An issued
// collective and its errors are in comm/work.h, the counters in comm/counters.h.
//
// Legend: N = size(), r = rank(), s = elements per rank (a shard), n = whole tensor.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "zero/comm/counters.h"
#include "zero/comm/work.h"

namespace zt::comm {

/// The time by which a wait must end.
using Deadline = std::chrono::steady_clock::time_point;

/// How a reduction combines ranks. kAvg divides the sum by N (integer types truncate);
/// kMax of floating values is NaN where any rank has a NaN (as torch.maximum; NCCL's
/// fmax drops it); bf16/f16 are reduced in fp32 and rounded once (ThreadComm, MpiComm).
enum class ReduceOp : uint8_t { kSum, kAvg, kMax };

/// "sum", "avg", "max".
const char* reduce_op_name(ReduceOp op);

/// Ends the error of a collective whose Work its rank dropped without wait().
inline constexpr const char* kUnwaitedWorkHint =
    "\n  (an asynchronous collective that failed after its rank dropped its Work without "
    "wait(): wait() on every Work a collective returns)";

/// A group of ranks. Tensors are contiguous, have storage, and live on device(); sizes
/// are flat (only numel matters). Calls must be issued in the same order on every rank.
/// A communicator of one rank runs every collective in place, so it takes tensors on
/// any one device (a one-rank thread communicator on a GPU, say).
/// While it lives, the collectives this thread issues carry `label` in their signatures
/// ("GatheredParameters", "save_checkpoint"): where ranks issue different collectives, the
/// mismatch error names the call each rank's came from. The innermost one applies, and a
/// collective's own label (all_gather_bytes(mine, label)) comes before it. `label` must
/// outlive the collectives (a string literal).
class CollectiveLabel {
 public:
  explicit CollectiveLabel(const char* label);
  ~CollectiveLabel();
  CollectiveLabel(const CollectiveLabel&) = delete;
  CollectiveLabel& operator=(const CollectiveLabel&) = delete;
  /// This thread's innermost label (nullptr when none).
  static const char* current();
  /// A copy of `text` that lives until the process exits, for a label made at run time (a
  /// module's path): one copy per distinct text.
  static const char* intern(const std::string& text);

 private:
  const char* previous_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// "thread", "mpi" or "nccl".
  virtual const char* backend() const = 0;
  /// Where this communicator's tensors live.
  virtual Device device() const { return Device::cpu(); }

  /// out[j*s, (j+1)*s) = in of rank j.  out: [N*s], in: [s]. In place when in is
  /// out's slice r. Blocking calls return a finished Work.
  std::shared_ptr<Work> all_gather(const Tensor& out, const Tensor& in, bool async = false);
  /// out = reduction over ranks of in[r*s, (r+1)*s).  out: [s], in: [N*s] (the caller
  /// pads n to a multiple of N). op: kSum or kAvg. out may be in's slice r.
  std::shared_ptr<Work> reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                                       bool async = false);
  /// t = reduction over ranks of t, in place.  t: [n], any n.
  std::shared_ptr<Work> all_reduce(const Tensor& t, ReduceOp op, bool async = false);
  /// t = t of `root`.  t: [n].
  std::shared_ptr<Work> broadcast(const Tensor& t, int root, bool async = false);
  /// out = in[r*s, (r+1)*s) of `root`.  out: [s]; in: [N*s], read on the root only (may
  /// be undefined elsewhere).
  std::shared_ptr<Work> scatter(const Tensor& out, const Tensor& in, int root, bool async = false);
  /// Returns once every rank called barrier().
  void barrier();
  /// Every rank's `mine`, indexed by rank; for small objects (hashes, counts, names).
  std::vector<std::string> all_gather_bytes(const std::string& mine);
  /// The same, its signature naming `label` (where the backend compares signatures, a
  /// rank that issued another collective meets a mismatch that names it).
  std::vector<std::string> all_gather_bytes(const std::string& mine, const char* label);
  /// After a failure of this rank's own that the others may or may not share (a forward
  /// that threw): the next collective it issues is preceded by an agreement, a blocking
  /// all_gather_bytes whose signature names `why` (the same text on every rank). Ranks
  /// that all failed alike meet there and go on (a retried step); a rank that failed alone
  /// meets the others' next collective instead, a mismatch every rank reports naming
  /// `why`, rather than pairing its retried collectives with their later ones.
  void agree_before_next_collective(const char* why) { agreement_ = why; }
  /// Every rank's value of a trivially copyable object, indexed by rank.
  template <typename T>
  std::vector<T> all_gather_object(const T& mine);

  /// How many collectives this rank has issued: the sequence number of its next one.
  int64_t issued() const { return seq_; }

  /// A copy of this rank's counters.
  CommCounters counters() const;
  void reset_counters();

  /// How long a collective may take (default: $ZT_COMM_TIMEOUT_MS or 600 s), counted
  /// from its wait (CPU backends) or its issue (NcclComm's watchdog). A timeout is an
  /// error naming the collective, its sequence number and, where known, missing ranks.
  /// A huge value (milliseconds::max()) waits for ever in effect: deadlines saturate. It
  /// must be positive (0 or less would fail every collective whose peers are not already
  /// there).
  void set_timeout(std::chrono::milliseconds t);
  std::chrono::milliseconds timeout() const { return timeout_.load(std::memory_order_relaxed); }

  /// Fails this communicator: pending and later collectives throw an error carrying
  /// `reason`; ThreadComm also wakes every other rank; MpiComm and NcclComm end the job
  /// (MPI_Abort) when size() > 1, since peers blocked in MPI cannot be woken otherwise.
  virtual void abort(const std::string& reason) = 0;
  /// The first abort reason, or "" while healthy.
  virtual std::string abort_reason() const = 0;
  /// After the rank's own code returned: waits for the collectives still queued and
  /// returns the first error of one whose Work was dropped without wait() (null if none),
  /// which launch() raises. No collective may be issued after it. Null by default (a
  /// backend whose errors reach their caller otherwise).
  virtual std::exception_ptr finish_queued() { return nullptr; }

 protected:
  Communicator(int rank, int size);

  /// One issued collective, validated and numbered.
  struct Request {
    Collective kind = Collective::kBarrier;
    int64_t seq = 0;
    Tensor out;  // all_gather, reduce_scatter, scatter; all_reduce/broadcast: the tensor
    Tensor in;   // all_gather, reduce_scatter, scatter (root); undefined otherwise
    ReduceOp op = ReduceOp::kSum;
    int root = 0;
    std::shared_ptr<const std::string> bytes_in;  // all_gather_bytes
    std::shared_ptr<std::vector<std::string>> bytes_out;
    const char* label = nullptr;  // in the signature: what the collective is for
    bool blocking = false;        // the caller waits for it at once (a backend may run it inline)
    int64_t counted_bytes = 0;    // the counters' volume, counted once it is issued
  };
  /// Starts a request; the backend completes work in issue order.
  virtual std::shared_ptr<Work> submit(Request req) = 0;
  /// "all_reduce #7 (f32 x 10, sum) on rank 1": names a request in errors.
  std::string describe(const Request& req) const;
  /// "all_reduce (f32 x 10, sum)": what every rank must agree on for a request.
  static std::string signature(const Request& req);
  /// Throws if aborted.
  void check_healthy(const Request& req) const;

 private:
  std::shared_ptr<Work> issue(Request req, bool async);
  /// Runs a request of a one-rank communicator in place (see issue()).
  static void run_alone(const Request& req);
  /// The device a collective's tensors must be on: device(), or with one rank the
  /// device of `t` (the collective's first tensor).
  Device tensor_device(const Tensor& t) const;
  void count(Collective c, int64_t bytes);

  int rank_;
  int size_;
  int64_t seq_ = 0;
  const char* agreement_ = nullptr;                 // agree_before_next_collective's `why`
  std::atomic<std::chrono::milliseconds> timeout_;  // set by the rank, read by its comm thread
  mutable std::mutex counters_mu_;
  CommCounters counters_;
};

template <typename T>
std::vector<T> Communicator::all_gather_object(const T& mine) {
  static_assert(std::is_trivially_copyable_v<T>, "all_gather_object needs a POD type");
  std::string b(sizeof(T), '\0');
  std::memcpy(b.data(), &mine, sizeof(T));
  std::vector<std::string> all = all_gather_bytes(b);
  std::vector<T> out(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ZT_CHECK(all[i].size() == sizeof(T), "all_gather_object: rank ", i, " sent ", all[i].size(),
             " bytes, expected ", sizeof(T));
    std::memcpy(&out[i], all[i].data(), sizeof(T));
  }
  return out;
}

/// The error for ranks that issued different collectives as request `seq`: `sides` says
/// who called what ("rank 0 called ..., rank 1 called ...").
std::string mismatch_message(int64_t seq, const std::string& sides);

/// now + timeout, a century at most (a "no timeout" value would overflow the clock).
inline std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  return std::chrono::steady_clock::now() +
         std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24 * 365 * 100));
}

}  // namespace zt::comm
