// StepGraph (step_graph.h): warm-up, capture and replay of a step on cuda::Graph.
#include "core/step_graph.h"

#include "core/error.h"
#ifdef ZT_WITH_CUDA
#include "core/cuda/graph.h"
#endif

namespace zt {

namespace {
void check_cuda_device(Device device) {
  ZT_CHECK(device.is_cuda(), "cuda_graph: the step runs on ", device.str(),
           "; CUDA graphs need a CUDA device (set device: cuda, or cuda_graph: false)");
}
}  // namespace

#ifdef ZT_WITH_CUDA
struct StepGraph::Impl {
  Impl(int device, int warmup) : graph(device), warmup_left(warmup) {}
  cuda::Graph graph;
  int warmup_left;
  std::vector<Tensor> outputs;  // the captured step's
  Tensor input;                 // stage()'s
};

StepGraph::StepGraph(Device device, int warmup) {
  check_cuda_device(device);
  ZT_CHECK(cuda_available(), "cuda_graph: no GPU is visible");
  ZT_CHECK(warmup >= 1, "cuda_graph: at least one warm-up step is needed before capture, got ",
           warmup);
  impl_ = std::make_unique<Impl>(device.index, warmup);
}

std::vector<Tensor> StepGraph::run(const Step& step, const std::function<void()>& before_replay) {
  Impl& s = *impl_;
  if (!s.graph.captured()) {
    if (s.warmup_left > 0) {
      --s.warmup_left;
      cuda::StreamGuard on(s.graph.stream());
      return step();
    }
    s.graph.capture([&] { s.outputs = step(); });
  }
  {
    cuda::StreamGuard on(s.graph.stream());  // the step's constants, in order with its replays
    before_replay();
  }
  s.graph.replay();
  return s.outputs;
}

Tensor StepGraph::stage(const Tensor& batch) {
  Tensor& in = impl_->input;
  if (!in.defined())
    in = Tensor::empty(batch.sizes(), batch.dtype(), Device::cuda(impl_->graph.stream().device()));
  ZT_CHECK(batch.sizes() == in.sizes() && batch.dtype() == in.dtype(), "cuda_graph: a batch of ",
           batch.str(), " after batches of ", in.str(), "; a graph replays one shape");
  in.copy_(batch);
  return in;
}

bool StepGraph::captured() const {
  return impl_->graph.captured();
}

size_t StepGraph::nodes() const {
  return impl_->graph.nodes();
}
#else
struct StepGraph::Impl {};

StepGraph::StepGraph(Device device, int) {
  check_cuda_device(device);
  ZT_FAIL(
      "cuda_graph: zt was built without CUDA; rebuild with -DZT_CUDA=ON, or set "
      "cuda_graph: false");
}

std::vector<Tensor> StepGraph::run(const Step&, const std::function<void()>&) {
  return {};
}

Tensor StepGraph::stage(const Tensor&) {
  return {};
}

bool StepGraph::captured() const {
  return false;
}

size_t StepGraph::nodes() const {
  return 0;
}
#endif

StepGraph::~StepGraph() = default;

}  // namespace zt
