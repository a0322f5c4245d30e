// Stopping a training run cleanly on SIGINT or SIGTERM (Ctrl-C, a scheduler's preemption
// notice, a launcher forwarding either): the run finishes its step, saves a checkpoint and
// returns, so `--resume` continues from that step with nothing lost.
#pragma once

#include <cstdint>

#include "zero/comm/communicator.h"

namespace zt::app {

/// While one is alive, the first SIGINT or SIGTERM the process receives is recorded (a
/// line on stderr says so) instead of ending the process; a second one ends it at once
/// (the signal's default action). Process-wide: thread ranks, each holding one, share the
/// handlers, which the first installs and the last restores.
class StopOnSignal {
 public:
  StopOnSignal();
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  /// The first signal received while installed (0: none yet).
  static int received();
};

/// The signal any rank received (0: none): every rank calls it at the same point of each
/// step, and every rank gets the same answer (one small all-reduce).
int agreed_stop_signal(comm::Communicator& comm);

}  // namespace zt::app
