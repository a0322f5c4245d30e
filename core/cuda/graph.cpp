// CUDA graph capture and replay (see graph.h).
#include "core/cuda/graph.h"

#include "core/cuda/allocator.h"
#include "core/cuda/check.h"
#include "core/cuda/device_error.h"
#include "core/error.h"
#include "core/work_counts.h"

namespace zt::cuda {

namespace {
thread_local Graph* t_graph = nullptr;  // the graph this thread is capturing
}  // namespace

Graph::Graph(int device) : device_(device), stream_(device, /*non_blocking=*/false) {}

Graph::~Graph() {
  // The pool release waits for the device, so the graph's last replay is done.
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  try {
    caching_allocator().release_capture_pool(device_, stream_.get());
  } catch (const std::exception&) {  // a destructor does not throw; the memory stays held
  }
}

void Graph::capture(const std::function<void()>& fn) {
  ZT_CHECK(!captured(), "CUDA graph: already captured; make a new Graph to capture again");
  ZT_CHECK(t_graph == nullptr, "CUDA graph: this thread is already capturing a graph");
  DeviceGuard dg(device_);
  StreamGuard sg(stream_);
  // Made on first use with a blocking memset, which a capture would refuse: make it now,
  // so a step whose first error-checking kernel runs inside the capture still captures.
  (void)device_error_record();
  CUDA_CHECK(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal));
  try {
    caching_allocator().begin_capture(device_, stream_.get());
  } catch (...) {
    cudaGraph_t none = nullptr;
    cudaStreamEndCapture(stream_.get(), &none);
    if (none) cudaGraphDestroy(none);
    throw;
  }
  t_graph = this;
  set_capturing(true);
  auto finish = [&]() -> cudaError_t {
    set_capturing(false);
    t_graph = nullptr;
    caching_allocator().end_capture(device_);
    return cudaStreamEndCapture(stream_.get(), &graph_);
  };
  auto discard = [&] {  // a failed capture keeps nothing
    cudaGetLastError();
    if (graph_) cudaGraphDestroy(graph_);
    graph_ = nullptr;
    nodes_ = 0;
    kept_.clear();
    kept_host_.clear();
  };
  try {
    fn();
  } catch (...) {
    finish();
    discard();
    throw;
  }
  if (const cudaError_t ended = finish(); ended != cudaSuccess) {
    discard();
    ZT_FAIL("CUDA graph: the capture on cuda:", device_, " is invalid (", cudaGetErrorString(ended),
            "). Some call in the step used another stream or a CUDA call a capture forbids; "
            "run the step once on Graph::stream() before capturing, and keep host waits out "
            "of it");
  }
  try {
    CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &nodes_));
    // Auto-free: an allocation a library recorded in the capture and left unfreed would
    // otherwise fail the next replay (cudaErrorInvalidValue).
    CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  } catch (...) {
    discard();
    throw;
  }
}

void Graph::replay() {
  ZT_CHECK(captured(), "CUDA graph: replay before capture");
  DeviceGuard dg(device_);
  ++::zt::detail::thread_work_counts().launches;
  CUDA_CHECK(cudaGraphLaunch(exec_, stream_.get()));
}

void Graph::keep_alive(const Tensor& t) {
  if (t_graph && t.defined()) t_graph->kept_.push_back(t);
}

void Graph::keep_alive(std::shared_ptr<void> host) {
  if (t_graph && host) t_graph->kept_host_.push_back(std::move(host));
}

}  // namespace zt::cuda
