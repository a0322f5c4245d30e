// Fused attention on the host: the GPU kernels' tiles (core/cuda/flash_tiles.h) on the
// emulated block of core/cpu/flash_host.h. It exists so the CPU suite runs the GPU
// algorithm itself (scaled_dot_product_attention takes it on the CPU under
// AttentionKernel::flash); it is not a fast CPU attention. Tasks are independent, so the
// bits do not depend on the thread count (but for dq under the atomic backward, whose
// blocks' additions land in the order the threads run them).
#include <memory>
#include <vector>

#include "core/cpu/flash_host.h"
#include "core/cpu/loops.h"
#include "core/cuda/flash_dispatch.h"
#include "core/kernels.h"

namespace zt::cpu {

namespace {

using flash::Pass;

template <Pass kPass>
void run(DType dt, int64_t d, const flash::Params& p) {
  flash::with_tiles<kPass, flash::HostBlock, bf16, f16>(dt, d, [&]<class Tiles>() {
    parallel_for(Tiles::tasks(p, flash::task_rows<kPass>(p)), 1, [&](int64_t t0, int64_t t1) {
      auto sm = std::make_unique<flash::SmemOf<Tiles, kPass>>();
      for (int64_t t = t0; t < t1; ++t) flash::run_task<Tiles, kPass>(p, t, *sm);
    });
  });
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, double scale, bool causal) {
  const flash::Params p = flash::params(q, k, v, out, {}, {}, {}, {}, lse, {}, scale, causal);
  run<Pass::forward>(q.dtype(), q.size(3), p);
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& delta, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& dout,
                              const Tensor& lse, double scale, bool causal) {
  flash::Params p = flash::params(q, k, v, out, dout, dq, dk, dv, lse, delta, scale, causal);
  std::vector<float> acc;  // the atomic backward's f32 dq
  flash::backward_passes(
      p, [&]<Pass kPass>() { run<kPass>(q.dtype(), q.size(3), p); },
      [&] {
        acc.assign(static_cast<size_t>(q.numel()), 0.f);
        return acc.data();
      });
}

}  // namespace zt::cpu
