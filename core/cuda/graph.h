// CUDA graphs: a step's GPU work recorded once and replayed with one launch. The graph
// owns a blocking stream (it orders itself with the legacy default stream, as every zt
// op does) on which its warm-up, its capture and its replays run, and that stream's
// block pool in the caching allocator is the graph's private pool (allocator.h).
//
// What a replay repeats is exactly the captured kernels with their captured arguments
// and addresses. So the captured work must
//   - read its inputs from tensors that stay alive at fixed addresses (copy each new
//     batch into them before a replay), and leave its outputs in tensors that the next
//     replay overwrites;
//   - take every value that changes between steps from device memory (the optimizer's
//     capturable mode, optim/optimizer.h), never from host arguments;
//   - not wait for the GPU on the host, read values back, or draw random numbers: each
//     raises a clear error during capture (check_not_capturing, stream.h);
//   - have run once on the graph's stream before, so that lazy set-ups (cuDNN algorithm
//     choice, workspaces) are not part of the capture. (Optimizer tables are the
//     exception: a capture records its own copy from a pinned buffer the graph keeps.)
// While a capture is open, no other thread may use the device's default (legacy) stream:
// a capturing blocking stream makes it unusable (cudaErrorStreamCaptureImplicit). zt's
// captures run with one thread on the GPU (train.cuda_graph, one rank per device).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <vector>

#include "core/cuda/stream.h"
#include "core/tensor.h"

namespace zt::cuda {

class Graph {
 public:
  /// An empty graph on `device` with its own stream.
  explicit Graph(int device);
  /// Waits for the last replay, then returns the private pool's memory.
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// The stream the graph's work runs on.
  const Stream& stream() const { return stream_; }
  /// Records the GPU work `fn` issues, with stream() as this thread's current stream,
  /// without running it. If fn throws or the capture is invalid, nothing is kept and the
  /// error names the cause. Once only.
  void capture(const std::function<void()>& fn);
  bool captured() const { return exec_ != nullptr; }
  /// Runs the captured work once more, on stream() (no host wait).
  void replay();
  /// Nodes (kernels, copies, fills) in the captured graph.
  size_t nodes() const { return nodes_; }

  /// Keeps `t`'s memory for as long as the graph this thread is capturing lives (for
  /// tensors captured kernels read whose owner may drop them, e.g. cached tables).
  /// No-op outside a capture.
  static void keep_alive(const Tensor& t);
  /// The same for host memory (e.g. a pinned buffer a captured copy reads at each replay).
  static void keep_alive(std::shared_ptr<void> host);

 private:
  int device_;
  Stream stream_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
  std::vector<Tensor> kept_;
  std::vector<std::shared_ptr<void>> kept_host_;
};

}  // namespace zt::cuda
