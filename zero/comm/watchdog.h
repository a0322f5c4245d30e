// The watchdog of a communicator whose waits do not block the host (NcclComm: wait()
// only orders the caller's stream after the collective). Nobody then sits in a loop that
// could notice a collective that never finishes, so one thread does it for the whole
// communicator: it polls the issued collectives in issue order, and when the oldest one
// passes its deadline, or the backend reports an asynchronous error, it reports the
// failure once, by a callback. Later calls on the communicator find the failure and throw.
//
// The thread sleeps on a condition variable while nothing is in flight, and polls every
// `interval` otherwise: the cost is one completion query per interval, off the critical
// path, and a failure is found within one interval of happening.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "zero/comm/communicator.h"

namespace zt::comm {

class Watchdog {
 public:
  /// Polled from the watchdog thread: true once the collective finished (never blocks).
  /// An exception it throws is the collective's failure (so is one from Health).
  using Done = std::function<bool()>;
  /// Polled from the watchdog thread while collectives are in flight: "" while healthy,
  /// else the backend's asynchronous error.
  using Health = std::function<std::string()>;
  /// Called once, from the watchdog thread, with the first failure's message.
  using Fail = std::function<void(const std::string&)>;

  /// Starts the thread. `health` may be empty (nothing to poll besides completion).
  Watchdog(Health health, Fail fail,
           std::chrono::microseconds interval = std::chrono::microseconds(1000));
  /// Stops the thread. Collectives still in flight are no longer watched: the owner
  /// finishes (or abandons) its work first.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Watches one issued collective. `what` names it ("all_gather #7 (f32 x 10) on rank
  /// 1"); it fails if `done` is still false `timeout` after this call. After a failure
  /// nothing new is watched (the communicator refuses new work anyway).
  void watch(std::string what, std::chrono::milliseconds timeout, Done done);
  /// Collectives watched and not yet seen finished.
  size_t in_flight() const;
  /// The failure reported, or "" while none was.
  std::string failure() const;

 private:
  struct Entry {
    std::string what;
    std::chrono::milliseconds timeout;
    Deadline deadline;
    Done done;
  };
  void loop();
  // Retires finished entries from the front; returns the failure message, or "".
  std::string poll();

  Health health_;
  Fail fail_;
  std::chrono::microseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> entries_;  // issue order; only the front can be the one that is late
  std::string failure_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace zt::comm
