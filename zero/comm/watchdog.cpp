// Watchdog: one thread polling the front of an issue-ordered queue. Work completes in
// issue order on a communicator, so the front is the only entry that can be late while
// the ones behind it are on time; the queue is polled front to back only as far as the
// first unfinished entry. `done` and `health` run without the lock, so a slow backend
// query never delays watch() on the issuing thread.
#include "zero/comm/watchdog.h"

#include "core/error.h"

namespace zt::comm {

Watchdog::Watchdog(Health health, Fail fail, std::chrono::microseconds interval)
    : health_(std::move(health)), fail_(std::move(fail)), interval_(interval) {
  ZT_CHECK(fail_, "Watchdog: a failure callback is required");
  ZT_CHECK(interval_.count() > 0, "Watchdog: the polling interval must be positive, got ",
           interval_.count(), " us");
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::watch(std::string what, std::chrono::milliseconds timeout, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) return;
    entries_.push_back({std::move(what), timeout, deadline_after(timeout), std::move(done)});
  }
  cv_.notify_all();
}

size_t Watchdog::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::string Watchdog::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

std::string Watchdog::poll() {
  for (;;) {
    Done done;
    std::string what;
    std::chrono::milliseconds timeout{};
    Deadline deadline;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (entries_.empty()) return "";
      const Entry& e = entries_.front();
      done = e.done;
      what = e.what;
      timeout = e.timeout;
      deadline = e.deadline;
    }
    // Read the clock before asking: an entry that finishes between the two is not late.
    const auto now = std::chrono::steady_clock::now();
    std::string error;
    try {  // a query that throws (a sticky device error) is this entry's failure
      if (done()) {
        std::lock_guard<std::mutex> lock(mu_);
        entries_.pop_front();  // only this thread pops: the front is still the entry asked
        continue;
      }
      if (health_) error = health_();
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty())
      return detail::cat("zt.comm: ", what, " failed: ", error, " (found by the watchdog)");
    if (now > deadline)
      return detail::cat("zt.comm: ", what, " timed out after ", timeout.count(),
                         " ms (see Communicator::set_timeout); the collective never finished, so "
                         "a rank did not issue it, issued a different one, or died");
    return "";
  }
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (entries_.empty()) {
      cv_.wait(lock, [&] { return stop_ || !entries_.empty(); });
      continue;
    }
    lock.unlock();
    std::string failure = poll();
    lock.lock();
    if (!failure.empty()) {
      failure_ = failure;
      entries_.clear();  // a failed communicator's work is abandoned, not watched
      lock.unlock();
      fail_(failure);
      lock.lock();
      cv_.wait(lock, [&] { return stop_; });  // one report; nothing more is watched
      break;
    }
    if (!entries_.empty()) cv_.wait_for(lock, interval_, [&] { return stop_; });
  }
}

}  // namespace zt::comm
