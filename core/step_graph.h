// StepGraph: a training step captured once as a CUDA graph and replayed (train.cuda_graph).
// The first `warmup` calls run the step eagerly on the graph's stream (so lazy set-ups,
// optimizer state and cuDNN choices exist before capture); the next call captures it
// and every call from then on replays it with one launch, the host doing nothing but
// `before_replay` (the optimizer's or engine's counters and step constants).
//
//   engine.set_capturable(true);
//   zt::StepGraph graph(device);
//   for (...) {
//     Tensor x = graph.stage(next_batch);   // the input lives at a fixed address
//     Tensor loss = graph.run([&] { ...forward(x), backward, engine.step()...; return {loss}; },
//                             [&] { engine.before_replay(); })[0];
//   }
//
// The step must have static shapes and read only tensors that stay alive; the outputs it
// returns are overwritten by each replay (clone one to keep it). Host reads, host waits
// and random draws inside the step raise an error at capture (core/cuda/graph.h lists the
// rules). CUDA only; a CPU device, or a build without CUDA, is an error.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace zt {

class StepGraph {
 public:
  using Step = std::function<std::vector<Tensor>()>;
  /// A graph for steps on `device` (CUDA), captured after `warmup` eager calls (>= 1).
  explicit StepGraph(Device device, int warmup = 2);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  /// One step: eager (warm-up), captured then replayed, or replayed. Returns the step's
  /// outputs (after a replay, the captured outputs, holding this step's values once the
  /// GPU gets there). `before_replay` runs on the host before every replay.
  std::vector<Tensor> run(const Step& step, const std::function<void()>& before_replay);
  /// Copies `batch` into the graph's input tensor (made on the graph's device by the first
  /// call) and returns that tensor, which the step should read: its address never changes.
  /// Every batch must have the first one's shape and dtype.
  Tensor stage(const Tensor& batch);
  /// True once the step is captured.
  bool captured() const;
  /// Nodes (kernels, copies, fills) in the captured graph (0 before capture).
  size_t nodes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt
