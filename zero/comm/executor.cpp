// Executor and CpuWork. A CpuWork's wait() needs no deadline of its own: every step a
// task blocks on (a rendezvous, an MPI request) carries the communicator's deadline and
// fails the communicator when it passes, which fails the queued tasks behind it at once.
#include "zero/comm/executor.h"

#include "core/parallel.h"
#include "zero/comm/spin.h"

namespace zt::comm {

std::shared_ptr<CpuWork> CpuWork::done() {
  auto w = std::make_shared<CpuWork>();
  w->finish(nullptr);
  return w;
}

void CpuWork::wait() {
  // Small collectives finish within microseconds: spin briefly before sleeping.
  spin_until([&] { return done_.load(std::memory_order_acquire); });
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_.load(std::memory_order_relaxed); });
  if (!error_) return;
  seen_.store(true, std::memory_order_release);
  std::rethrow_exception(error_);
}

bool CpuWork::test() {
  return done_.load(std::memory_order_acquire);
}

void CpuWork::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

Executor::Executor() : thread_([this, l = current_ledger()] { loop(l); }) {}

Executor::~Executor() {
  finish();
}

std::exception_ptr Executor::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const auto& [w, err] : failed_)
    if (!lost_ && w.use_count() == 1 && !w->error_seen()) lost_ = err;  // no one can wait()
  failed_.clear();
  return lost_;
}

std::shared_ptr<Work> Executor::submit(std::function<void()> task) {
  auto w = std::make_shared<CpuWork>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    // No thread would run it, and a wait() on its work would block for ever.
    ZT_CHECK(!stop_,
             "zt.comm: a collective was issued after its communicator's queue was closed "
             "(finish_queued(), or the communicator is being destroyed): no collective may be "
             "issued after it");
    queue_.emplace_back(std::move(task), w);
  }
  cv_.notify_one();
  return w;
}

bool Executor::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !busy_;
}

void Executor::loop(std::shared_ptr<MemoryLedger> ledger) {
  LedgerScope ledger_scope(std::move(ledger));
  MemTagScope tag(MemTag::kCommBuffer);
  set_num_threads(1);  // the rank's compute threads are the caller's; copies need one
  for (;;) {
    std::pair<std::function<void()>, std::shared_ptr<CpuWork>> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    std::exception_ptr err;
    try {
      item.first();
    } catch (...) {
      err = std::current_exception();
    }
    item.first = nullptr;  // drop the task's tensors before the caller may see the work done
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      if (err) failed_.emplace_back(item.second, err);
    }
    item.second->finish(err);
  }
}

}  // namespace zt::comm
