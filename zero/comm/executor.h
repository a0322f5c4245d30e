// The communication thread of a CPU communicator: runs queued tasks one at a time, in
// issue order, while the caller computes. Each task finishes a CpuWork. The thread
// charges the creating rank's memory ledger (tag kCommBuffer) and uses one kernel thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/allocator.h"
#include "zero/comm/communicator.h"

namespace zt::comm {

/// A Work finished by an Executor task.
class CpuWork : public Work {
 public:
  void wait() override;
  bool test() override;
  /// Marks the work done; `error` (may be null) is rethrown by wait().
  void finish(std::exception_ptr error);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// One thread executing tasks in submission order.
class Executor {
 public:
  /// Starts the thread; it charges the ledger current on the calling thread.
  Executor();
  /// Runs what is queued, then joins.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Queues task; its exception (if any) is delivered through the returned work.
  std::shared_ptr<Work> submit(std::function<void()> task);

 private:
  void loop(std::shared_ptr<MemoryLedger> ledger);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<CpuWork>>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace zt::comm
