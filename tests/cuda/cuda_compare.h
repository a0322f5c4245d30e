// Helpers for the CUDA-vs-CPU op tests: why a test skips, seeded inputs, and running one
// function (forward and backward) on both devices so its output and every input
// gradient can be compared. Each comparison states its tolerance at the call site.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/gpu_skip.h"
#include "common/test_util.h"

#ifdef ZT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace zt::cuda_test {

/// The devices the comparisons run on: the first GPU, and the CPU as the reference.
inline const Device kGpu = Device::cuda(0);
inline const Device kCpu = Device::cpu();

/// Why there is no GPU, for the skip message.
inline std::string no_gpu_reason() {
#ifdef ZT_WITH_CUDA
  int n = 0;
  cudaError_t s = cudaGetDeviceCount(&n);
  if (s != cudaSuccess) return cudaGetErrorString(s);
  return "no GPU visible (check CUDA_VISIBLE_DEVICES)";
#else
  return "zt was built without CUDA (-DZT_CUDA=OFF)";
#endif
}

/// Skips the test without a GPU, saying why (fails it instead under ZT_REQUIRE_GPU=1).
#define ZT_SKIP_WITHOUT_GPU() ZT_GPU_OR_SKIP(::zt::cuda_test::no_gpu_reason())

/// Standard normals (drawn in f64), rounded to dt.
inline Tensor normal_cpu(const Shape& s, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  return randn(s, g, DType::f64).to(dt);
}

/// Integers in [lo, hi) as i64 (or i32), seeded.
inline Tensor ints_cpu(const Shape& s, int64_t lo, int64_t hi, uint64_t seed,
                       DType dt = DType::i64) {
  Generator g(seed);
  return randint(lo, hi, s, g).to(dt);
}

/// The output of fn and the gradients of its inputs on one device.
struct Run {
  Tensor out;
  std::vector<Tensor> grads;  // undefined for inputs that are not differentiable
};

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Runs fn on copies of `inputs` moved to `dev` (floating ones become leaves requiring
/// grad), then backward with a seeded upstream gradient of the output's shape. The
/// upstream values are rounded to bf16 first, so every dtype sees the same numbers.
inline Run run_on(Device dev, const Fn& fn, const std::vector<Tensor>& inputs, bool backward = true,
                  uint64_t seed = 99) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) {
    Tensor l = t.to(dev).detach();
    if (backward && is_floating(t.dtype())) l.set_requires_grad(true);
    leaves.push_back(l);
  }
  Run r;
  Tensor out = fn(leaves);
  if (backward && is_floating(out.dtype())) {
    Generator g(seed);
    Tensor up = randn(out.sizes(), g, DType::f64).to(DType::bf16).to(out.dtype());
    out.backward(up.to(dev));
  }
  r.out = out.detach();
  for (const Tensor& l : leaves) r.grads.push_back(l.requires_grad() ? l.grad() : Tensor());
  return r;
}

/// Output and every defined gradient within |gpu - cpu| <= atol + rtol |cpu|.
inline ::testing::AssertionResult runs_match(const Run& gpu, const Run& cpu, double rtol,
                                             double atol) {
  auto r = test::all_close(gpu.out.to(DType::f64), cpu.out.to(DType::f64), rtol, atol);
  if (!r) return ::testing::AssertionFailure() << "output: " << r.message();
  for (size_t i = 0; i < cpu.grads.size(); ++i) {
    if (!cpu.grads[i].defined() && !gpu.grads[i].defined()) continue;
    if (cpu.grads[i].defined() != gpu.grads[i].defined())
      return ::testing::AssertionFailure() << "gradient " << i << " defined on one device only";
    r = test::all_close(gpu.grads[i].to(DType::f64), cpu.grads[i].to(DType::f64), rtol, atol);
    if (!r)
      return ::testing::AssertionFailure() << "gradient of input " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace zt::cuda_test
