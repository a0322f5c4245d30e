// The communication thread of a CPU communicator: runs queued tasks one at a time, in
// issue order, while the caller computes. Each task finishes a CpuWork. The thread
// charges the creating rank's memory ledger (tag kCommBuffer) and uses one kernel thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "zero/comm/communicator.h"

namespace zt::comm {

/// A Work finished by an Executor task.
class CpuWork : public Work {
 public:
  /// A work that has already finished (a collective run inline).
  static std::shared_ptr<CpuWork> done();
  void wait() override;
  bool test() override;
  /// Marks the work done; `error` (may be null) is rethrown by wait().
  void finish(std::exception_ptr error);
  /// True once wait() has raised the work's error to a caller.
  bool error_seen() const { return seen_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};  // set under mu_; read without it while spinning
  std::atomic<bool> seen_{false};
  std::exception_ptr error_;
};

/// One thread executing tasks in submission order.
class Executor {
 public:
  /// Starts the thread; it charges the ledger current on the calling thread.
  Executor();
  /// Runs what is queued, then joins.
  ~Executor();
  /// Runs what is queued and joins now; returns the first error of a task whose work no
  /// one held any more (an async collective dropped without wait(): its error would
  /// otherwise go unseen), or null. The executor takes no tasks after it.
  std::exception_ptr finish();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Queues task; its exception (if any) is delivered through the returned work. Throws
  /// after finish().
  std::shared_ptr<Work> submit(std::function<void()> task);
  /// True when no task is queued or running (the submitting thread may then run one
  /// itself without reordering).
  bool idle();

 private:
  void loop(std::shared_ptr<MemoryLedger> ledger);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<CpuWork>>> queue_;
  bool stop_ = false;
  bool busy_ = false;  // a task is running
  // The works that failed, in order: at finish(), the first that no one holds and no
  // wait() raised is lost_ (whether the caller still held it when it failed is a race).
  std::vector<std::pair<std::shared_ptr<CpuWork>, std::exception_ptr>> failed_;
  std::exception_ptr lost_;
  std::thread thread_;
};

}  // namespace zt::comm
