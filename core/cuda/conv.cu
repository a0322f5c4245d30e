// CUDA convolution through cuDNN's convolution API: forward, backward data and backward
// filter, plus the bias (a broadcast add forward; a per-channel sum in double backward: the
// CPU's sums 16 lanes in the tensor's dtype first, so the two agree to that dtype's
// rounding). The twin of core/cpu/conv.cpp, same ConvGeometry and contract.
// Legend: N batch, C in channels, O out channels, D/H/W input sizes, Do/Ho/Wo output
// sizes, L = Do*Ho*Wo.
//
// Padding: cuDNN pads symmetrically. The geometry carries only the front pads; the op
// (core/ops/conv.cpp) pads the input explicitly first when the back pads would change
// the output size, so here a front pad p always means p on both sides.
//
// A batch whose input or output passes 2^31 - 1 elements, more than a cuDNN descriptor
// takes, runs as chunks of samples (conv_chunks.cu), each a call of these launchers.
//
// Descriptors are made once per geometry and thread and reused. Algorithms:
// cudnnGet*Algorithm_v7 heuristics, cached per geometry; the ranked results that
// succeeded and need at most kMaxConvWorkspace bytes (asked again under each one's math
// type) are tried in the order of conv_rank.h (deterministic ones first unless
// conv_algo_policy().deterministic is off; for exact f32, sums of products before FFT and
// Winograd), with conv_algo_policy().benchmark the first group reordered by timing each
// candidate once per geometry (time_candidates, as PyTorch's cudnn.benchmark), and one that
// cuDNN refuses at run time is dropped. f32 runs in exact fp32 (FMA
// math) unless set_tf32({.conv = true}) (core/device.h); bf16/f16 use tensor cores with fp32
// accumulation and fall back to an f32 computation (said once per shape on stderr) when cuDNN runs
// none of its engines for them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "core/algo_policy.h"
#include "core/allocator.h"
#include "core/cuda/allocator.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/conv_chunks.h"
#include "core/cuda/conv_rank.h"
#include "core/cuda/cudnn.h"
#include "core/cuda/gemm.h"
#include "core/cuda/loops.cuh"
#include "core/cuda/stream.h"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

// ---------------------------------------------------------------- kernels

// grad_bias[o] = sum over (n, l) of grad_out (N, O, L); one block per channel, summed
// in double in a fixed tree.
template <typename T>
__global__ void bias_grad_kernel(const T* gy, T* gb, int64_t n, int64_t o, int64_t l) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x;
  double s = 0;
  for (int64_t b = 0; b < n; ++b) {
    const T* row = gy + (b * o + c) * l;
    for (int64_t i = threadIdx.x; i < l; i += blockDim.x) s += convert<double>(row[i]);
  }
  s = block_all_sum(s, scratch);
  if (threadIdx.x == 0) gb[c] = convert<T>(static_cast<acc_t<T>>(s));
}

// ---------------------------------------------------------------- cuDNN setup

int as_int(int64_t v) {
  ZT_CHECK(v >= 0 && v <= INT32_MAX, "conv: size ", v, " does not fit cuDNN's 32-bit sizes");
  return static_cast<int>(v);
}

// A 2-D convolution when the depth axis is trivial: cuDNN has more (and faster) 2-D
// engines than 3-D ones.
bool is_2d(const ConvGeometry& g) {
  return g.d == 1 && g.kd == 1 && g.od == 1 && g.pad_d == 0;
}

// Error unless padding the front pads on both sides gives the geometry's output size.
void check_symmetric(const ConvGeometry& g) {
  auto out = [](int64_t in, int64_t k, int64_t s, int64_t p, int64_t dil) {
    return (in + 2 * p - dil * (k - 1) - 1) / s + 1;
  };
  ZT_CHECK(out(g.d, g.kd, g.sd, g.pad_d, g.dd) == g.od &&
               out(g.h, g.kh, g.sh, g.pad_h, g.dh) == g.oh &&
               out(g.w, g.kw, g.sw, g.pad_w, g.dw) == g.ow,
           "conv on CUDA: cuDNN pads symmetrically; pad the input with zt::pad first for "
           "asymmetric padding (conv2d / conv3d do this)");
}

using Pass = ConvPass;
using Choice = ConvChoice;

// Everything cuDNN needs to describe one call.
struct ConvDescs {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  bool exact_f32;  // f32 without TF32: only FMA algorithms
  DType dtype;

  ConvDescs(const ConvGeometry& g, DType dt)
      : x(dt, dims(g, g.n, g.c, g.d, g.h, g.w)),
        y(dt, dims(g, g.n, g.o, g.od, g.oh, g.ow)),
        w(dt, dims(g, g.o, g.c / g.groups, g.kd, g.kh, g.kw)),
        conv(is_2d(g) ? std::vector<int>{as_int(g.pad_h), as_int(g.pad_w)}
                      : std::vector<int>{as_int(g.pad_d), as_int(g.pad_h), as_int(g.pad_w)},
             is_2d(g) ? std::vector<int>{as_int(g.sh), as_int(g.sw)}
                      : std::vector<int>{as_int(g.sd), as_int(g.sh), as_int(g.sw)},
             is_2d(g) ? std::vector<int>{as_int(g.dh), as_int(g.dw)}
                      : std::vector<int>{as_int(g.dd), as_int(g.dh), as_int(g.dw)},
             as_int(g.groups), dt == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
        exact_f32(dt == DType::f32 && !tf32().conv),
        dtype(dt) {
    reset_math();
  }

  // The math type the heuristics are asked with (a call then sets its algorithm's).
  void reset_math() {
    if (exact_f32) {
      conv.set_math(CUDNN_FMA_MATH);
    } else if (dtype == DType::f64) {
      conv.set_math(CUDNN_DEFAULT_MATH);
    } else {
      conv.set_math(CUDNN_TENSOR_OP_MATH);
    }
  }

  static std::vector<int> dims(const ConvGeometry& g, int64_t a, int64_t b, int64_t d, int64_t h,
                               int64_t w) {
    if (is_2d(g)) return {as_int(a), as_int(b), as_int(h), as_int(w)};
    return {as_int(a), as_int(b), as_int(d), as_int(h), as_int(w)};
  }
};

// Device, dtype, pass, exact f32, the ConvAlgoPolicy's two flags, the geometry.
using CacheKey = std::tuple<int, int, int, bool, bool, bool, std::array<int64_t, 22>>;

// Usable candidates per call geometry, best first; one that fails to run is dropped.
std::mutex g_cache_mutex;
std::map<CacheKey, std::vector<Choice>>& choice_cache() {
  static std::map<CacheKey, std::vector<Choice>> cache;
  return cache;
}

CacheKey cache_key(const ConvGeometry& g, DType dt, Pass pass, bool exact,
                   ConvAlgoPolicy policy = {}) {
  return {current_device(),
          static_cast<int>(dt),
          static_cast<int>(pass),
          exact,
          policy.benchmark,
          policy.deterministic,
          std::array<int64_t, 22>{g.n,  g.c,  g.o,  g.d,  g.h,     g.w,     g.kd,    g.kh,
                                  g.kw, g.sd, g.sh, g.sw, g.pad_d, g.pad_h, g.pad_w, g.od,
                                  g.oh, g.ow, g.dd, g.dh, g.dw,    g.groups}};
}

// This thread's descriptors for a geometry and dtype, made on first use and reused
// after: a call then sets only the math type of its algorithm instead of creating and
// filling four cuDNN descriptors. (The key's pass is fixed: descriptors serve all three.)
ConvDescs& descs_for(const ConvGeometry& g, DType dt) {
  thread_local std::map<CacheKey, std::unique_ptr<ConvDescs>> descs;
  const CacheKey key = cache_key(g, dt, Pass::kForward, dt == DType::f32 && !tf32().conv);
  auto it = descs.find(key);
  if (it == descs.end()) it = descs.emplace(key, std::make_unique<ConvDescs>(g, dt)).first;
  it->second->reset_math();
  return *it->second;
}

// A status by which cuDNN refuses one algorithm or configuration (cuDNN 9's 3xxx family,
// "not supported"), not the installation: 3005-3009 (driver, runtime, architecture,
// sub-library) throw like any other error, so that the real cause is named.
bool refused(cudnnStatus_t st) {
  const int s = static_cast<int>(st);
  return s / 1000 == 3 && !cudnn_installation_failure(s);
}

// cuDNN's ranked list of the pass's algorithms (empty when it refuses the configuration
// itself, so that 16-bit convolutions fall back to f32).
std::vector<Choice> ranked(Pass pass, ConvDescs& d, cudnnHandle_t h, bool deterministic_first) {
  d.reset_math();  // not the math the last candidate run or sized left on the descriptor
  int returned = 0;
  cudnnStatus_t st;
  std::vector<Choice> c;
  if (pass == Pass::kForward) {
    cudnnConvolutionFwdAlgoPerf_t perfs[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    st = ZT_API(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w.get(), d.conv.get(),
                                                       d.y.get(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                       &returned, perfs));
    if (st == CUDNN_STATUS_SUCCESS)
      c = usable_algos(pass, perfs, returned, d.exact_f32, deterministic_first);
  } else if (pass == Pass::kBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perfs[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    st = ZT_API(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        &returned, perfs));
    if (st == CUDNN_STATUS_SUCCESS)
      c = usable_algos(pass, perfs, returned, d.exact_f32, deterministic_first);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perfs[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    st = ZT_API(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        &returned, perfs));
    if (st == CUDNN_STATUS_SUCCESS)
      c = usable_algos(pass, perfs, returned, d.exact_f32, deterministic_first);
  }
  if (st != CUDNN_STATUS_SUCCESS && !refused(st))
    detail::throw_cudnn_error(st, "cudnnGetConvolution*Algorithm_v7", __FILE__, __LINE__);
  return c;
}

// The workspace `c` needs under its own math type: the ranked list sized it under the
// descriptor's default math, and some algorithms need more under another. Refused: nullopt.
std::optional<size_t> workspace_bytes(Pass pass, ConvDescs& d, cudnnHandle_t h, const Choice& c) {
  d.conv.set_math(c.math);
  size_t bytes = 0;
  cudnnStatus_t st;
  if (pass == Pass::kForward)
    st = ZT_API(cudnnGetConvolutionForwardWorkspaceSize(
        h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
        static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), &bytes));
  else if (pass == Pass::kBackwardData)
    st = ZT_API(cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
        static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), &bytes));
  else
    st = ZT_API(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), &bytes));
  if (refused(st)) return std::nullopt;
  if (st != CUDNN_STATUS_SUCCESS)
    detail::throw_cudnn_error(st, "cudnnGetConvolution*WorkspaceSize", __FILE__, __LINE__);
  return bytes;
}

std::vector<Choice> candidates(const CacheKey& key, Pass pass, ConvDescs& d, cudnnHandle_t h,
                               bool deterministic_first) {
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = choice_cache().find(key);
    if (it != choice_cache().end()) return it->second;
  }
  std::vector<Choice> c;
  for (Choice choice : ranked(pass, d, h, deterministic_first)) {
    const std::optional<size_t> bytes = workspace_bytes(pass, d, h, choice);
    if (!bytes || *bytes > kMaxConvWorkspace) continue;
    choice.workspace = std::max(choice.workspace, *bytes);
    c.push_back(choice);
  }
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  choice_cache()[key] = c;
  return c;
}

// The key's cached candidate list and `c`'s place in it; the caller holds g_cache_mutex.
std::pair<std::vector<Choice>*, std::vector<Choice>::iterator> cached_place(const CacheKey& key,
                                                                            const Choice& c) {
  std::vector<Choice>& cached = choice_cache()[key];
  auto it = std::find_if(cached.begin(), cached.end(),
                         [&](const Choice& o) { return o.algo == c.algo && o.math == c.math; });
  return {&cached, it};
}

// Puts `c` first among the key's cached candidates.
void move_first(const CacheKey& key, const Choice& c) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  auto [cached, it] = cached_place(key, c);
  if (it != cached->end()) std::rotate(cached->begin(), it, it + 1);
}

// Keys whose candidates were timed; the caller holds g_cache_mutex.
std::set<CacheKey>& timed_keys() {
  static std::set<CacheKey> keys;
  return keys;
}

// PyTorch's cudnn.benchmark (conv_algo_policy().benchmark): on a key's first call outside
// a graph capture, each candidate of the first try group (the deterministic ones unless the
// policy lets all compete, see conv_rank.h) runs twice on the call's own tensors (its outputs are
// overwritten, and the real call writes them again after), the second run timed with events, and
// that group is put in order of time; the other groups follow in cuDNN's order. One host wait per
// candidate, once per shape; a candidate that fails here is left for run_candidates.
template <typename Call>
void time_candidates(const CacheKey& key, ConvDescs& d, Device dev, const Call& call) {
  std::vector<Choice> cands;
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    if (!timed_keys().insert(key).second) return;
    cands = choice_cache()[key];
  }
  if (cands.size() < 2 || cands[1].group != cands[0].group) return;
  const cudaStream_t stream = current_stream();
  std::vector<std::pair<float, Choice>> timed;
  size_t n = 0;
  for (; n < cands.size() && cands[n].group == cands[0].group; ++n) {
    const Choice& c = cands[n];
    float ms = INFINITY;
    try {
      d.conv.set_math(c.math);
      Tensor ws = device_bytes(c.workspace, dev);
      void* wp = ws.defined() ? ws.data_ptr() : nullptr;
      Event start(true), stop(true);
      if (call(c, wp) == CUDNN_STATUS_SUCCESS) {
        start.record(stream);
        const cudnnStatus_t st = call(c, wp);
        stop.record(stream);
        stop.synchronize();
        if (st == CUDNN_STATUS_SUCCESS) ms = stop.elapsed_ms(start);
      }
    } catch (const OutOfMemoryError&) {
    }
    timed.emplace_back(ms, c);
  }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < n; ++i) cands[i] = timed[i].second;
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  choice_cache()[key] = cands;
}

// Runs `call(choice, workspace)` with the candidates in order until one runs; a
// candidate cuDNN refuses at run time ("not supported", 3xxx) is dropped from the cache,
// and one whose workspace does not fit in memory is passed over for the next, which may
// need less (the one that runs then moves first, so later calls do not ask for the memory
// again; if none runs, the out-of-memory error is thrown). Other errors throw. False when
// none runs.
template <typename Call>
bool run_candidates(const ConvGeometry& g, DType dt, Pass pass, ConvDescs& d, cudnnHandle_t h,
                    Device dev, const Call& call) {
  const ConvAlgoPolicy policy = conv_algo_policy();
  const CacheKey key = cache_key(g, dt, pass, d.exact_f32, policy);
  if (policy.benchmark && !capturing()) {
    candidates(key, pass, d, h, policy.deterministic);  // the list to time, cached
    time_candidates(key, d, dev, call);
  }
  std::vector<Choice> cands = candidates(key, pass, d, h, policy.deterministic);
  std::exception_ptr no_memory;
  for (const Choice& c : cands) {
    d.conv.set_math(c.math);
    Tensor ws;
    try {
      ws = device_bytes(c.workspace, dev);
    } catch (const OutOfMemoryError&) {
      if (!no_memory) no_memory = std::current_exception();
      continue;
    }
    cudnnStatus_t st = call(c, ws.defined() ? ws.data_ptr() : nullptr);
    if (st == CUDNN_STATUS_SUCCESS) {
      ++::zt::detail::thread_work_counts().launches;
      if (no_memory) move_first(key, c);
      return true;
    }
    if (!refused(st)) CUDNN_CHECK_STATUS(st, "the cuDNN convolution");
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto [cached, it] = cached_place(key, c);
    if (it != cached->end()) cached->erase(it);
  }
  if (no_memory) std::rethrow_exception(no_memory);
  return false;
}

// cuDNN scaling factors: double for double data, float otherwise.
struct Scale {
  double d1 = 1.0, d0 = 0.0;
  float f1 = 1.0f, f0 = 0.0f;
  const void* one(DType dt) const { return dt == DType::f64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(DType dt) const {
    return dt == DType::f64 ? static_cast<const void*>(&d0) : &f0;
  }
};

// Says once per pass, shape and dtype (on stderr) that a 16-bit convolution runs in f32 for
// want of a cuDNN engine: correct, but slower, which a benchmark should show.
void say_f32_fallback(const char* pass, const Tensor& x, const Tensor& weight) {
  static std::mutex mu;
  static std::set<std::string> said;
  const std::string what = std::string(pass) + " of input " + shape_str(x.sizes()) + ", weight " +
                           shape_str(weight.sizes()) + " in " + dtype_name(x.dtype());
  std::lock_guard<std::mutex> lock(mu);
  if (said.insert(what).second)
    std::fprintf(stderr, "zt: cuDNN runs no engine for the convolution %s; computing it in f32\n",
                 what.c_str());
}

Tensor as_f32(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor f = Tensor::empty(t.sizes(), DType::f32, t.device());
  copy(f, t);
  return f;
}

void copy_back(const Tensor& dst, const Tensor& src) {
  if (dst.defined() && src.defined()) copy(dst, src);
}

// cuDNN refuses some engines for an operand off a 16-byte boundary (a contiguous view at
// an odd offset, x.narrow(0, 1, n)): with a status the candidates' loop does not take for
// a refusal, and a refusal would drop the engine from the cache for the shape's aligned
// calls too. Such operands go through aligned copies (the allocator's blocks are aligned).
bool aligned(const Tensor& t) {
  return !t.defined() || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

bool all_aligned(std::initializer_list<Tensor> ts) {
  return std::all_of(ts.begin(), ts.end(), aligned);
}

Tensor aligned_copy(const Tensor& t) {
  if (aligned(t)) return t;
  Tensor c = Tensor::empty(t.sizes(), t.dtype(), t.device());
  copy(c, t);
  return c;
}

// y (N, O, L) += bias (O), broadcast.
void add_bias(const ConvGeometry& g, const Tensor& out, const Tensor& bias) {
  Tensor y = out.view({g.n, g.o, g.out_positions()});
  axpy(y, y, bias.view({1, g.o, 1}).expand(y.sizes()), 1.0);
}

void check_conv(const char* what, const ConvGeometry& g, std::initializer_list<Tensor> ts) {
  DType dt = DType::f32;
  bool first = true;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    ZT_CHECK(t.is_contiguous(), what, ": expects contiguous tensors, got a strided ", t.str());
    if (first) dt = t.dtype();
    ZT_CHECK(t.dtype() == dt, what, ": expects one dtype, got ", dtype_name(dt), " and ", t.str());
    first = false;
  }
  ZT_CHECK(is_floating(dt), what, ": expects a floating dtype, got ", dtype_name(dt));
  check_symmetric(g);
}

}  // namespace

// ---------------------------------------------------------------- launchers

// grad_bias (O) = grad_out (N, O, L) summed over n and l: any size (64-bit indices).
void conv_bias_gradient(const ConvGeometry& g, const Tensor& grad_out, const Tensor& grad_bias) {
  if (g.n * g.out_positions() == 0) {
    fill(grad_bias, 0.0);
    return;
  }
  dispatch_device_floating(grad_out.dtype(), "conv bias grad", [&]<typename T>() {
    bias_grad_kernel<T><<<grid_x(g.o, "bias_grad_kernel"), kThreads, 0, current_stream()>>>(
        static_cast<const T*>(grad_out.data_ptr()), static_cast<T*>(grad_bias.data_ptr()), g.n, g.o,
        g.out_positions());
    CUDA_CHECK_LAUNCH();
  });
}

void conv_forward(const ConvGeometry& g, const Tensor& out, const Tensor& x, const Tensor& weight,
                  const Tensor& bias) {
  check_conv("conv forward", g, {out, x, weight, bias});
  check_device("conv forward", out.device(), {x, weight, bias});
  if (out.numel() == 0) return;
  if (conv_forward_in_chunks(g, out, x, weight, bias)) return;  // past cuDNN's tensor size
  if (!all_aligned({out, x, weight, bias})) {
    const Tensor o = aligned_copy(out);
    cuda::conv_forward(g, o, aligned_copy(x), aligned_copy(weight), aligned_copy(bias));
    if (!o.same(out)) copy(out, o);
    return;
  }
  const DType dt = x.dtype();
  DeviceGuard guard(out.device().index);
  cudnnHandle_t h = cudnn_handle();
  ConvDescs& d = descs_for(g, dt);
  Scale s;
  bool ran =
      run_candidates(g, dt, Pass::kForward, d, h, out.device(), [&](const Choice& c, void* ws) {
        return ZT_API(cudnnConvolutionForward(h, s.one(dt), d.x.get(), x.data_ptr(), d.w.get(),
                                              weight.data_ptr(), d.conv.get(),
                                              static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws,
                                              c.workspace, s.zero(dt), d.y.get(), out.data_ptr()));
      });
  if (!ran && is_16bit_float(dt)) {  // no 16-bit engine for this shape: compute in f32
    say_f32_fallback("forward", x, weight);
    Tensor o32 = Tensor::empty(out.sizes(), DType::f32, out.device());
    cuda::conv_forward(g, o32, as_f32(x), as_f32(weight), as_f32(bias));
    copy(out, o32);
    return;
  }
  ZT_CHECK(ran, "conv forward: cuDNN has no algorithm for input ", shape_str(x.sizes()),
           ", weight ", shape_str(weight.sizes()), " in ", dtype_name(dt));
  if (bias.defined()) add_bias(g, out, bias);
}

void conv_backward(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                   const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                   const Tensor& grad_bias) {
  check_conv("conv backward", g, {grad_out, x, weight, grad_x, grad_weight, grad_bias});
  check_device("conv backward", grad_out.device(), {x, weight, grad_x, grad_weight, grad_bias});
  if (conv_backward_in_chunks(g, grad_out, x, weight, grad_x, grad_weight, grad_bias))
    return;  // past cuDNN's tensor size
  if (!all_aligned({grad_out, x, weight, grad_x, grad_weight, grad_bias})) {
    const Tensor gx = aligned_copy(grad_x), gw = aligned_copy(grad_weight),
                 gb = aligned_copy(grad_bias);
    cuda::conv_backward(g, aligned_copy(grad_out), aligned_copy(x), aligned_copy(weight), gx, gw,
                        gb);
    for (const auto& [dst, src] : {std::pair{grad_x, gx}, {grad_weight, gw}, {grad_bias, gb}})
      if (!src.same(dst)) copy_back(dst, src);
    return;
  }
  const DType dt = x.dtype();
  const Device dev = grad_out.device();
  DeviceGuard guard(dev.index);
  if (grad_bias.defined()) conv_bias_gradient(g, grad_out, grad_bias);
  if (!grad_x.defined() && !grad_weight.defined()) return;
  if (grad_out.numel() == 0) {  // empty batch: nothing flows back
    if (grad_x.defined()) fill(grad_x, 0.0);
    if (grad_weight.defined()) fill(grad_weight, 0.0);
    return;
  }
  cudnnHandle_t h = cudnn_handle();
  ConvDescs& d = descs_for(g, dt);
  Scale s;
  bool ran_x = !grad_x.defined(), ran_w = !grad_weight.defined();
  if (!ran_x) {
    ran_x = run_candidates(g, dt, Pass::kBackwardData, d, h, dev, [&](const Choice& c, void* ws) {
      return ZT_API(cudnnConvolutionBackwardData(
          h, s.one(dt), d.w.get(), weight.data_ptr(), d.y.get(), grad_out.data_ptr(), d.conv.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, c.workspace, s.zero(dt),
          d.x.get(), grad_x.data_ptr()));
    });
  }
  if (!ran_w) {
    ran_w = run_candidates(g, dt, Pass::kBackwardFilter, d, h, dev, [&](const Choice& c, void* ws) {
      return ZT_API(cudnnConvolutionBackwardFilter(
          h, s.one(dt), d.x.get(), x.data_ptr(), d.y.get(), grad_out.data_ptr(), d.conv.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, c.workspace, s.zero(dt),
          d.w.get(), grad_weight.data_ptr()));
    });
  }
  if ((!ran_x || !ran_w) && is_16bit_float(dt)) {  // compute the missing ones in f32
    say_f32_fallback(ran_x ? "filter gradient" : (ran_w ? "input gradient" : "gradients"), x,
                     weight);
    Tensor gx = ran_x ? Tensor() : Tensor::empty(grad_x.sizes(), DType::f32, dev);
    Tensor gw = ran_w ? Tensor() : Tensor::empty(grad_weight.sizes(), DType::f32, dev);
    cuda::conv_backward(g, as_f32(grad_out), as_f32(x), as_f32(weight), gx, gw, Tensor());
    copy_back(grad_x, gx);
    copy_back(grad_weight, gw);
    return;
  }
  ZT_CHECK(ran_x && ran_w, "conv backward: cuDNN has no algorithm for input ", shape_str(x.sizes()),
           ", weight ", shape_str(weight.sizes()), " in ", dtype_name(dt));
}

}  // namespace zt::cuda
