// Statistics of a training window, reduced across ranks: means of named scalars, codebook
// usage, step times, and PSNR.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "zero/comm/communicator.h"

namespace zt::app {

/// PSNR in dB of data in [-1, 1] (peak-to-peak 2): 10 log10(4 / mse), at most 99 (that
/// of mse 0).
double psnr_from_mse(double mse);

/// Means of named scalars over a window of steps and over every rank. Every rank must add
/// the same names (the order does not matter) and call reduce() at the same steps.
class ScalarWindow {
 public:
  /// Adds one value of `name` to this rank's window (a new name joins the window); or,
  /// with `count`, the sum of that many values.
  void add(const std::string& name, double value, double count = 1.0);
  /// Global means per name (sum over ranks / count over ranks), over the names any rank
  /// added (a rank whose micro-batches were all skipped for a non-finite loss added none);
  /// clears the window. Every rank calls it.
  std::vector<std::pair<std::string, double>> reduce(comm::Communicator& comm);
  bool empty() const { return names_.empty(); }

 private:
  std::vector<std::string> names_;  // sorted
  std::vector<double> sums_, counts_;
};

/// Codebook usage over a window: a histogram of code ids, summed across ranks.
struct CodebookStats {
  int64_t used = 0;         ///< distinct codes seen in the window (all ranks)
  double usage = 0.0;       ///< used / codebook_size
  double perplexity = 0.0;  ///< exp(entropy) of the code distribution
  int64_t tokens = 0;       ///< codes counted (all ranks)
};

/// This rank's histogram of the code ids seen since the last reduce(), kept on the codes'
/// device: counting reads nothing back (on a GPU a read is a host wait), reduce() does.
class CodebookUsage {
 public:
  explicit CodebookUsage(int64_t codebook_size);
  /// Counts every id of `codes` (i64 or i32, any shape); error on an id outside [0, K).
  void add(const Tensor& codes);
  /// Adds a histogram (K counts, f64, as bincount(codes, K) gives: e.g. weighted by
  /// whether the micro-batch's loss was finite).
  void add_counts(const Tensor& counts);
  /// All-reduces the histogram (every rank must call) and clears the window.
  CodebookStats reduce(comm::Communicator& comm);

 private:
  int64_t size_;
  Tensor counts_;  // f64 on the device of the first counts added; undefined before
};

/// Seconds per step: mean over the steps since the last reset; the ETA.
class StepTimer {
 public:
  void start() {
    t0_ = std::chrono::steady_clock::now();
    if (steps_ == 0) first_ = t0_;
  }
  /// Ends a step started by start(); returns its seconds.
  double stop();
  /// Mean seconds per step of the current window, and clears it.
  double window_mean();
  /// Mean seconds per step over the whole run (0 before the first step).
  double run_mean() const { return steps_ ? total_ / static_cast<double>(steps_) : 0.0; }
  /// Seconds `left` more steps take at the wall-clock pace since the first step began:
  /// the evaluations, checkpoints and logging between steps count, so it holds.
  double eta(int64_t left) const;

 private:
  std::chrono::steady_clock::time_point t0_, first_;
  double window_ = 0.0, total_ = 0.0;
  int64_t window_steps_ = 0, steps_ = 0;
};

}  // namespace zt::app
