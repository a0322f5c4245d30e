// What a training loop learns from each micro-batch (its loss and the loss's terms, whether
// its input was finite) and from each step (the gradient norm), kept on the device that
// computed it until the loop settles the log. On a GPU every read is a host wait, which
// would stop the host from queueing the next step while the GPU runs this one; so the
// loops settle after their first step and at their log, eval, checkpoint and codebook
// restart steps (every save settles first), and a step that is none of these reads nothing
// back. Settling is also where the non-finite policy acts.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "zero/engine.h"

namespace zt::app {

class StepLog {
 public:
  /// One value per micro-batch: `name` keys it; `about` names it in the report of a
  /// non-finite loss (e.g. "mse (decoder output vs. input)"); the first term is the loss.
  struct Term {
    std::string name;
    std::string about;
  };
  /// One micro-batch, read back: its terms' values in order.
  struct Row {
    int64_t step = 0;   ///< 1-based, as the loops log steps
    int64_t micro = 0;  ///< the micro-batch within the step
    std::vector<double> values;
    bool finite() const;  ///< whether the loss (values[0]) is finite
  };

  /// `app` names the command in errors ("vqtok train").
  StepLog(std::vector<Term> terms, std::string app);

  /// Queues micro-batch `micro` of `step`: the terms' values (one floating element each,
  /// on one device, in terms' order) and, if defined, the input batch, of which only its
  /// finiteness is kept (computed where it lives). The values are copied in one kernel per
  /// dtype: a replayed CUDA graph overwrites its outputs.
  void add(int64_t step, int64_t micro, const std::vector<Tensor>& values,
           const Tensor& input = Tensor());
  /// Queues `step`'s global gradient norm (Engine::last_grad_norm_tensor(), copied).
  void add_norm(int64_t step, const Tensor& norm);

  /// Reads everything queued (one host wait on a GPU; nothing when the queue is empty),
  /// applies the non-finite policy across ranks (a collective: every rank settles at the
  /// same steps), and returns this rank's rows in the order they were added.
  ///
  /// The policy: with fp16 (engine.loss_scaler().active(), whatever the scale) the engine
  /// skipped each update whose loss or gradients were not finite and training goes on.
  /// Otherwise the first step at which any rank's loss, or the global gradient norm, was
  /// not finite is an error on every rank (comm::AgreedError). It names that step, the
  /// rank, the micro-batch and what was not finite (the input batch, else the loss terms,
  /// else their weighted sum), and the step `now` that found it. No checkpoint of that
  /// step or a later one exists then, since every save settles first.
  std::vector<Row> settle(zero::Engine& engine, int64_t now);

  /// Settles that read something back (each a host wait on a GPU).
  int64_t reads() const { return reads_; }
  /// True once kMaxPending micro-batches wait: the loops settle then too, so that a long
  /// log interval holds a bounded queue (every rank adds as many per step, so all agree).
  bool full() const { return rows_.size() >= kMaxPending; }
  static constexpr size_t kMaxPending = 1024;

 private:
  std::string report(const Row& row, bool input_finite) const;

  std::vector<Term> terms_;
  std::string app_;
  struct Pending {
    int64_t step, micro;
    bool has_input;
    Tensor values;  // f64: the terms, then the input's sum of squares (finite if it is)
  };
  std::vector<Pending> rows_;
  std::vector<std::pair<int64_t, Tensor>> norms_;  // (step, f64 norm)
  int64_t reads_ = 0;
};

}  // namespace zt::app
