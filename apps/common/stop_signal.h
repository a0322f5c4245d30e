// Stopping a training run cleanly on SIGINT or SIGTERM (Ctrl-C, a scheduler's preemption
// notice, a launcher forwarding either): the run finishes its step, saves a checkpoint and
// returns, so `--resume` continues from that step with nothing lost.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "configs/app_config.h"
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

/// The end of step `done` of a training loop, on every rank: save(done) every
/// train.checkpoint_every steps, then agreed_stop_signal, saving this step (if not just
/// saved, and checkpoints are on) when a signal came. Returns the signal (0: go on, and
/// 0 after the last step, which ends the run as it would have anyway).
int checkpoint_or_stop(const config::TrainConfig& tc, int64_t done,
                       const std::function<void(int64_t)>& save, comm::Communicator& comm);

/// What a run stopped by `signal` after step `step` prints: where its checkpoint is
/// (`checkpoint`, "" when checkpoints are off) and how to continue.
std::string stopped_line(const char* app, int signal, int64_t step, const std::string& checkpoint);

}  // namespace zt::app
