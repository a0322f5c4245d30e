// The checkpoints of a training loop: every train.checkpoint_every steps, of the step a
// stop signal ended the run after (app::StopOnSignal), and of the last step. vqtok and
// vqgpt share it; each says how to write one of its checkpoints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "configs/app_config.h"
#include "zero/comm/communicator.h"

namespace zt::app {

class RunCheckpoints {
 public:
  /// save(step) writes a checkpoint of `step` (every rank calls it) and returns its folder.
  RunCheckpoints(const config::TrainConfig& tc, std::function<std::string(int64_t)> save);

  /// After step `done` ran, before it logs, on every rank: whether a signal came
  /// (agreed_stop_signal), so the run stops after this step. True then, and that step logs
  /// the window it ends; a signal after the last step ends the run as usual.
  bool signalled(int64_t done, comm::Communicator& comm);
  /// The end of step `done`, on every rank, before its evaluation (one that fails then
  /// loses no step): the periodic save and the last step's, then, when signalled() said
  /// so, this step's (unless just saved, or checkpoints are off). True when the run stops
  /// here.
  bool stop_after(int64_t done);
  /// After the loop, which ran from step `start`: the last step's checkpoint (unless saved
  /// already, or a signal stopped the run); when nothing was left to train, the newest
  /// checkpoint under `existing` (the resumed folder or the run's root).
  void finish(int64_t start, const std::string& existing);

  /// The newest checkpoint of the run ("" with checkpoints off).
  const std::string& last() const { return last_; }
  /// The signal that stopped the run early (0: none).
  int stopped_by() const { return signal_; }
  /// What a run stopped by a signal prints: the step, its checkpoint, how to continue.
  std::string stopped_line(const char* app) const;

 private:
  bool on() const { return every_ > 0; }
  void save(int64_t step);

  int64_t every_, steps_;
  std::function<std::string(int64_t)> save_;
  std::string last_;
  int64_t last_step_ = -1;
  int signal_ = 0;
  int64_t stopped_after_ = -1;
};

}  // namespace zt::app
